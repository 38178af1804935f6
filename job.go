// Package fairway holds the domain types that every part of Fairway shares:
// jobs, their states and priorities, the submission that creates them, and
// the errors the parts return to each other and to clients.
//
// The packages below it each implement one side of the system: store/ keeps
// jobs in PostgreSQL, events/ is the NATS wire contract and Go client,
// coordinator/ ingests and fairly selects jobs, executor/ runs task code.
//
// Start here:
//
//   - To submit jobs, follow their events, cancel or inspect them from Go:
//     events.NewClient(nc, events.ClientOptions{}), then Client.Submit,
//     SubmitWait, Subscribe, Cancel, Get (nc is a NATS connection; with
//     isolated tenants, open it with nats.UserCredentials("tenant-….creds")).
//   - To run task code: executor.New(nc, executor.Config{AppID: …}), then
//     Handle, Start and Shutdown.
//   - From any other language: publish JSON to NATS subjects (see package
//     events and the README's "The NATS API").
package fairway

import (
	"encoding/json"
	"time"
)

// State is where a job is in its life.
type State string

// The job states: Docspell's, plus REGARDS' pending (held until released).
const (
	StatePending   State = "pending"   // held until released
	StateWaiting   State = "waiting"   // eligible once run_at has passed
	StateScheduled State = "scheduled" // claimed for an executor
	StateRunning   State = "running"   // the executor started the task
	StateStuck     State = "stuck"     // failed, will be retried after its delay
	StateSuccess   State = "success"   // final
	StateFailed    State = "failed"    // final: retries exhausted, permanent error or expired
	StateCancelled State = "cancelled" // final
	// StateRejected is not a job state: it is the state named by the event
	// published for a submission that failed validation. No job row exists.
	StateRejected State = "rejected"
	// StateFired and StateSkipped are not job states either: they name the
	// events of a periodic task that submitted its job (fired; the event's
	// job is the new one) or skipped a due time because its previous job
	// has not ended (skipped; the event's job is that previous one).
	StateFired   State = "fired"
	StateSkipped State = "skipped"
)

// EventOnly reports whether s names events but no job state.
func (s State) EventOnly() bool {
	return s == StateRejected || s == StateFired || s == StateSkipped
}

// States lists every job state in lifecycle order.
var States = []State{StatePending, StateWaiting, StateScheduled, StateRunning, StateStuck, StateSuccess, StateFailed, StateCancelled}

// Final reports whether no further state change can happen.
func (s State) Final() bool {
	return s == StateSuccess || s == StateFailed || s == StateCancelled
}

// Valid reports whether s is a job state.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Priority decides, through the counting scheme, which jobs of a group go
// first.
type Priority string

// The two priorities, as in Docspell.
const (
	PriorityHigh Priority = "high"
	PriorityLow  Priority = "low"
)

// Job is a submitted unit of work, as stored and as reported to clients.
type Job struct {
	// ID is unique within the job's group.
	ID         string          `json:"id"`
	Task       string          `json:"task"`
	Group      string          `json:"group"`
	Args       json.RawMessage `json:"args"`
	Subject    string          `json:"subject,omitempty"`
	Submitter  string          `json:"submitter,omitempty"`
	Priority   Priority        `json:"priority"`
	Tracker    string          `json:"tracker,omitempty"`
	State      State           `json:"state"`
	Retries    int             `json:"retries"`
	MaxRetries int             `json:"max_retries"`
	Attempt    int             `json:"attempt"`
	RunAt      time.Time       `json:"run_at"`
	ExpiresAt  *time.Time      `json:"expires_at,omitempty"`
	// TriggerAfter is when a pending job is released by itself.
	TriggerAfter *time.Time `json:"trigger_after,omitempty"`
	DependsOn    []string   `json:"depends_on,omitempty"`
	Progress     int        `json:"progress"`
	// Executor is the app-id of the executor running the job or that ran
	// it last. (Its JSON name "worker" is the wire contract: it stays.)
	Executor string `json:"worker,omitempty"`
	// LeaseUntil is no longer set (since 2026-11-30, when the row engine
	// went: the journal's leader keeps a job an executor holds while its
	// heartbeats come); it stays in the wire format for the clients that
	// read it.
	LeaseUntil *time.Time      `json:"lease_until,omitempty"`
	Submitted  time.Time       `json:"submitted"`
	Started    *time.Time      `json:"started,omitempty"`
	Finished   *time.Time      `json:"finished,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	// NoExecutor is true while the job waits (pending, waiting or stuck)
	// and no live executor runs its task: it runs once one registers.
	// Computed from the live executors when the job is read, not stored.
	NoExecutor bool `json:"no_executor,omitempty"`
	// EstimatedEnd is when a running job will end at its pace so far (see
	// EstimateEnd): computed when the job is read, absent unless it runs
	// with a progress between 1 and 99.
	EstimatedEnd *time.Time `json:"estimated_end,omitempty"`
	// Timeout bounds each attempt (a Go duration, as submitted); empty:
	// the executor's default for the task, if any.
	Timeout string `json:"timeout,omitempty"`
	// TraceParent is the job's trace context, a W3C traceparent: stored
	// at submission (see Submission.TraceParent) and, in a dispatch, the
	// span of the claim that handed the job out, so that the executor's
	// span joins the job's trace. Empty when tracing is off.
	TraceParent string `json:"traceparent,omitempty"`
}

// JobRef names a job. Job ids are unique per group only (a tenant's ids
// never collide with, block or reveal another's), so a job is named by its
// group and its id.
type JobRef struct {
	Group string `json:"group"`
	ID    string `json:"id"`
}

// Ref returns the job's name.
func (j *Job) Ref() JobRef { return JobRef{Group: j.Group, ID: j.ID} }

// LogLine is one line a task logged while running a job.
type LogLine struct {
	Group   string    `json:"group,omitempty"`
	JobID   string    `json:"job_id"`
	Attempt int       `json:"attempt"`
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

// Executor is an executor as the coordinators know it.
type Executor struct {
	AppID         string    `json:"app_id"`
	Instance      string    `json:"instance"`
	Host          string    `json:"host"`
	Slots         int       `json:"slots"`
	Running       int       `json:"running"`
	Tasks         []string  `json:"tasks"`
	Started       time.Time `json:"started"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// State is live, gone or deregistered; only a live executor's tasks
	// count as run. Set by the coordinators: ignored in a registration.
	State ExecutorState `json:"state,omitempty"`
	// Left is when the executor was marked gone or deregistered.
	Left *time.Time `json:"left,omitempty"`
}

// ExecutorState is where an executor is in its life, as the coordinators
// see it.
type ExecutorState string

// The executor states.
const (
	// ExecutorLive: registered and sending heartbeats.
	ExecutorLive ExecutorState = "live"
	// ExecutorGone: silent for several leases (it died, or is cut off);
	// marked by the coordinators' sweep. It is live again once it
	// registers again.
	ExecutorGone ExecutorState = "gone"
	// ExecutorDeregistered: it shut down gracefully and said so.
	ExecutorDeregistered ExecutorState = "deregistered"
)

// Limit is a concurrency limit: at most Max jobs of a task, or of a group,
// held by executors (scheduled or running) at once, across the cluster.
type Limit struct {
	// Kind is "task" or "group".
	Kind string `json:"kind"`
	// Name is the task or the group; "*" (kind group) is the limit of
	// every group without one of its own.
	Name string `json:"name"`
	Max  int    `json:"max"`
	// Held is how many jobs the task or group holds now (for "*": the
	// most any one group holds).
	Held    int       `json:"held"`
	Updated time.Time `json:"updated"`
}
