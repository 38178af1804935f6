package events

import (
	"cmp"
	"strings"

	"github.com/fairwayhq/fairway"
)

// DefaultPrefix is the default first token of every Fairway subject.
const DefaultPrefix = "fairway"

// The verbs of the request/reply API.
const (
	VerbSubmit      = "submit"
	VerbCancel      = "cancel"
	VerbGet         = "get"
	VerbWait        = "wait" // body: WaitRequest; answered when the job ends, or its wait runs out
	VerbList        = "list"
	VerbLogs        = "logs"
	VerbRelease     = "release"      // a pending job becomes waiting
	VerbPriority    = "priority"     // body: id and priority
	VerbExecutors   = "executors"    // admin only
	VerbPrune       = "prune"        // admin only; body: PruneRequest
	VerbRetry       = "retry"        // body: JobRequest; a failed or cancelled job runs again
	VerbStats       = "stats"        // body: StatsRequest
	VerbBulk        = "bulk"         // body: BulkRequest
	VerbDrain       = "drain"        // admin only; body: DrainRequest
	VerbPause       = "pause"        // admin only; body: PauseCommand
	VerbWorkflow    = "workflow"     // tenant only; body: fairway.Workflow
	VerbGraph       = "graph"        // body: JobRequest; the job with its dependencies and dependents
	VerbLimits      = "limits"       // admin only; the concurrency limits
	VerbLimitSet    = "limit-set"    // admin only; body: LimitRequest
	VerbLimitDelete = "limit-delete" // admin only; body: LimitRequest
	VerbPartitions  = "partitions"   // admin only; the journal's partitions
	// Periodic task verbs (admin only).
	VerbPeriodicSave    = "periodic-save"    // body: a fairway.PeriodicTask; creates or replaces
	VerbPeriodicList    = "periodic-list"    // no body
	VerbPeriodicEnable  = "periodic-enable"  // body: {"id": …}
	VerbPeriodicDisable = "periodic-disable" // body: {"id": …}
	VerbPeriodicRunNow  = "periodic-run-now" // body: {"id": …}; fires at once
	VerbPeriodicDelete  = "periodic-delete"  // body: {"id": …}
)

// Subjects builds the subjects and stream names under one prefix.
type Subjects struct{ Prefix string }

// NewSubjects returns the subjects under prefix, or under DefaultPrefix when
// prefix is empty.
func NewSubjects(prefix string) Subjects {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Subjects{Prefix: prefix}
}

func (s Subjects) join(tokens ...string) string {
	return s.Prefix + "." + strings.Join(tokens, ".")
}

// Submit is the subject a job for group and task is published to.
func (s Subjects) Submit(group, task string) string { return s.join("submit", group, task) }

// SubmitAll matches every submission: a group and a task at least (a
// subject of more tokens is refused by ingest, with its rejected event).
func (s Subjects) SubmitAll() string { return s.join("submit", "*", ">") }

// SubmitGroup matches every submission of group.
func (s Subjects) SubmitGroup(group string) string { return s.join("submit", group, ">") }

// API is the request subject of a tenant's verb.
func (s Subjects) API(group, verb string) string { return s.join("api", group, verb) }

// APIAll matches every tenant API request: <p>.api.<group>.<verb>.
func (s Subjects) APIAll() string { return s.join("api", "*", "*") }

// Admin is the request subject of an operator verb.
func (s Subjects) Admin(verb string) string { return s.join("admin", verb) }

// AdminAll matches every operator API request.
func (s Subjects) AdminAll() string { return s.join("admin", "*") }

// Event is the subject an event about a job of group and task in state is
// published to.
func (s Subjects) Event(group, task string, state fairway.State) string {
	return s.join("events", safeToken(group), safeToken(task), string(state))
}

// EventFilter is the subject filter for events; empty arguments match all.
func (s Subjects) EventFilter(group, task string, state fairway.State) string {
	return s.join("events", orStar(group), orStar(task), orStar(string(state)))
}

// EventsAll matches every event.
func (s Subjects) EventsAll() string { return s.join("events", ">") }

// Progress is the subject of a job's progress (fairway.Progress, core
// NATS): <p>.progress.<group>.<task>.
func (s Subjects) Progress(group, task string) string { return s.join("progress", group, task) }

// ProgressFilter is the subject that matches the progress of group ("":
// every group) and task ("": every task).
func (s Subjects) ProgressFilter(group, task string) string {
	return s.join("progress", cmp.Or(group, "*"), cmp.Or(task, "*"))
}

// NotifyWork is the wakeup subject executors listen on.
func (s Subjects) NotifyWork() string { return s.join("notify", "work") }

// NotifyPeriodic tells the coordinators that a periodic task changed.
func (s Subjects) NotifyPeriodic() string { return s.join("notify", "periodic") }

// The verbs of the executor protocol, <p>.exec.<app-id>.<verb>.
const (
	ExecRegister   = "register"
	ExecDeregister = "deregister" // body DeregisterRequest
	ExecDispatch   = "dispatch"
	ExecHeartbeat  = "heartbeat"
	ExecPong       = "pong"
)

// Exec is the subject executor appID sends verb on (ExecRegister,
// ExecDeregister, ExecDispatch, ExecHeartbeat).
func (s Subjects) Exec(appID, verb string) string { return s.join("exec", appID, verb) }

// ExecAll matches verb from every executor.
func (s Subjects) ExecAll(verb string) string { return s.join("exec", "*", verb) }

// Pong is the reply subject of a ping to executor appID: the executor
// answers there, under its own app-id.
func (s Subjects) Pong(appID, nonce string) string { return s.join("exec", appID, ExecPong, nonce) }

// ParseExec returns the app-id and verb of an executor protocol subject.
func (s Subjects) ParseExec(subject string) (appID, verb string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.Prefix+".exec.")
	if !found {
		return "", "", false
	}
	appID, verb, ok = strings.Cut(rest, ".")
	return appID, verb, ok && appID != ""
}

// Results is the subject executor appID reports to.
func (s Subjects) Results(appID string) string { return s.join("results", appID) }

// ParseResults returns the app-id of a results subject: a report as
// published (Results), or as an executor's own stream keeps it
// (ExecutorResults).
func (s Subjects) ParseResults(subject string) (appID string, ok bool) {
	appID, ok = strings.CutPrefix(subject, s.Prefix+".results.")
	if !ok {
		appID, ok = strings.CutPrefix(subject, s.Prefix+".executor-results.")
	}
	return appID, ok && appID != "" && !strings.Contains(appID, ".")
}

// Cancel is the subject that tells executor appID to cancel a job.
func (s Subjects) Cancel(appID string) string { return s.Executor(appID, "cancel") }

// Drain is the subject that tells executor appID to drain: take no more
// jobs, finish its running ones, deregister and exit.
func (s Subjects) Drain(appID string) string { return s.Executor(appID, "drain") }

// Pause is the subject that tells executor appID to pause or resume
// (PauseCommand).
func (s Subjects) Pause(appID string) string { return s.Executor(appID, "pause") }

// Ping is the subject that asks executor appID whether it is alive.
func (s Subjects) Ping(appID string) string { return s.Executor(appID, "ping") }

// ResultsAll matches every executor's reports.
func (s Subjects) ResultsAll() string { return s.join("results", ">") }

// ExecutorResults is what an executor publishes to Results(appID) arrives
// as in operator mode: its account's import renames it, and only the
// executor's own stream (ExecutorResultStream) captures it, so that one
// executor's reports fill its own stream's bytes and no other's.
func (s Subjects) ExecutorResults(appID string) string { return s.join("executor-results", appID) }

// ExecutorResultsAll matches the reports of every executor's own stream.
func (s Subjects) ExecutorResultsAll() string { return s.join("executor-results", "*") }

// ExecutorResultStream is the name of the stream of one executor's reports
// (appID is a valid name: letters, digits, '-' and '_').
func (s Subjects) ExecutorResultStream(appID string) string {
	return s.streamName("RESULTS") + "_E_" + appID
}

// Reported is the subject on which the results streams announce each
// message they store, headers only (JetStream's republish), so that
// coordinators fetch from the executors that have reports waiting.
func (s Subjects) Reported(appID string) string { return s.join("reported", appID) }

// ReportedAll matches every announcement of a stored report.
func (s Subjects) ReportedAll() string { return s.join("reported", "*") }

// ParseReported returns the app-id of an announcement of a stored report.
func (s Subjects) ParseReported(subject string) (appID string, ok bool) {
	appID, ok = strings.CutPrefix(subject, s.Prefix+".reported.")
	return appID, ok && appID != "" && !strings.Contains(appID, ".")
}

// Executor is the subject of a command to executor appID.
func (s Subjects) Executor(appID, verb string) string { return s.join("executor", appID, verb) }

// SubmitStream is the name of the JetStream stream holding submissions.
func (s Subjects) SubmitStream() string { return s.streamName("SUBMIT") }

// EventStream is the name of the JetStream stream holding lifecycle events.
func (s Subjects) EventStream() string { return s.streamName("EVENTS") }

// ResultStream is the name of the JetStream stream holding executor reports.
func (s Subjects) ResultStream() string { return s.streamName("RESULTS") }

// DeadStream is the name of the JetStream stream holding dead letters.
func (s Subjects) DeadStream() string { return s.streamName("DEAD") }

// Dead is the subject of a dead letter of kind (DeadSubmit, DeadReport,
// DeadEvent).
func (s Subjects) Dead(kind string) string { return s.join("dead", kind) }

// DeadAll matches every dead letter.
func (s Subjects) DeadAll() string { return s.join("dead", ">") }

// LeadBucket is the name of the JetStream key-value bucket where the
// coordinators keep which of them leads the cluster (nats-api.md).
func (s Subjects) LeadBucket() string { return s.streamName("LEAD") }

func (s Subjects) streamName(kind string) string {
	return strings.ToUpper(s.Prefix) + "_" + kind
}

// ParseSubmit splits a submit subject into group and task: a submission's
// subject as published (Submit), or as a tenant's stream keeps it
// (TenantSubmit). ok is false when the subject does not have exactly that
// shape.
func (s Subjects) ParseSubmit(subject string) (group, task string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.Prefix+".submit.")
	if !found {
		if rest, found = strings.CutPrefix(subject, s.Prefix+".tenant-submit."); !found {
			return "", "", false
		}
	}
	group, task, ok = strings.Cut(rest, ".")
	return group, task, ok && !strings.Contains(task, ".")
}

// TenantSubmit is the subject a tenant's submission for task arrives on in
// the coordinators' account (operator mode): the tenant publishes to
// Submit(group, task) in its own account, and its import renames that to
// this, which only its own stream (TenantSubmitStream) captures.
func (s Subjects) TenantSubmit(group, task string) string {
	return s.join("tenant-submit", group, task)
}

// TenantSubmitAll matches every submission of every tenant's stream.
func (s Subjects) TenantSubmitAll() string { return s.join("tenant-submit", ">") }

// TenantSubmitStream is the name of the stream of one tenant's submissions
// (group is a valid name: letters, digits, '-' and '_').
func (s Subjects) TenantSubmitStream(group string) string {
	return s.streamName("SUBMIT") + "_T_" + group
}

// Stored is the subject on which the submit streams announce each message
// they store, with its headers only (JetStream's republish): its group,
// task and stream, so that coordinators fetch from the groups that have
// submissions waiting, and from no other.
func (s Subjects) Stored(group, task string) string { return s.join("submitted", group, task) }

// StoredAll matches every announcement of a stored submission.
func (s Subjects) StoredAll() string { return s.join("submitted", ">") }

// ParseStored returns the group of an announcement of a stored submission.
func (s Subjects) ParseStored(subject string) (group string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.Prefix+".submitted.")
	if !found || rest == "" {
		return "", false
	}
	group, _, _ = strings.Cut(rest, ".")
	return group, group != ""
}

// ParseAPI splits an API subject into group and verb.
func (s Subjects) ParseAPI(subject string) (group, verb string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.Prefix+".api.")
	if !found {
		return "", "", false
	}
	group, verb, ok = strings.Cut(rest, ".")
	return group, verb, ok
}

// ToLeader is the subject on which a coordinator that follows the
// journal's partition forwards an API request it received on subject
// (an API or admin subject) to the partition's leader, the only one that
// appends the rows of changes to jobs: <p>.leader.<subject's tokens after
// the prefix>. Coordinators only: it is in no tenant's or executor's
// account.
func (s Subjects) ToLeader(subject string) string {
	return s.join("leader", strings.TrimPrefix(subject, s.Prefix+"."))
}

// CoordinatorBeat is where each coordinator says, every second, that it
// is alive (core NATS, the coordinators' own: its body is the
// coordinator's name), so that the others notice one gone and sweep the
// streams for what it held.
func (s Subjects) CoordinatorBeat() string { return s.join("coordinators", "beat") }

// ToLeaderAll matches every request forwarded to the leader.
func (s Subjects) ToLeaderAll() string { return s.join("leader", ">") }

// ParseToLeader returns the subject a forwarded request was received on.
func (s Subjects) ParseToLeader(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".leader.")
	return s.Prefix + "." + rest, ok
}

// ParseAdmin returns the verb of an admin subject.
func (s Subjects) ParseAdmin(subject string) (verb string, ok bool) {
	return strings.CutPrefix(subject, s.Prefix+".admin.")
}

func orStar(v string) string {
	if v == "" {
		return "*"
	}
	return v
}

// safeToken keeps a name usable as one subject token: a name that is not
// (only possible for rejected submissions) becomes "_".
func safeToken(name string) string {
	if fairway.CheckName("name", name) != nil {
		return "_"
	}
	return name
}
