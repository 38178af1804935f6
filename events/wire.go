package events

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/nats-io/nats.go"
)

// Event is a lifecycle event as published on <prefix>.events.… (see
// fairway.Event).
type Event = fairway.Event

// Reply is the body of every request/reply API answer: either Error is set,
// or the verb's result is in the other fields.
type Reply struct {
	Error *fairway.Error `json:"error,omitempty"`
	ID    string         `json:"id,omitempty"`   // submit
	Job   *fairway.Job   `json:"job,omitempty"`  // submit, get, cancel
	Jobs  []fairway.Job  `json:"jobs,omitempty"` // list, graph
	// Refs answers workflow: each job's ref and the id it was stored under.
	Refs map[string]string `json:"refs,omitempty"`
	// Limits answers limits, limit-set and limit-delete: the limits now.
	Limits []fairway.Limit `json:"limits,omitempty"`
	// Rates answers limits, rate-set and rate-delete: the rate limits now.
	Rates []fairway.RateLimit `json:"rates,omitempty"`
	// Groups answers groups and weight-set: each group's share of the
	// slot-time.
	Groups    []fairway.GroupShare `json:"groups,omitempty"`
	Logs      []fairway.LogLine    `json:"logs,omitempty"` // logs
	Executors []fairway.Executor   `json:"executors,omitempty"`
	// Periodic holds the periodic tasks of the periodic-* verbs.
	Periodic []fairway.PeriodicTask `json:"periodic,omitempty"`
	// Warning, on submit, says why an accepted job may wait: no live
	// executor runs its task.
	Warning string `json:"warning,omitempty"`
	// NextCursor continues a list or logs answer that stopped at its limit
	// or at the reply's size cap: pass it as the next request's cursor.
	// Empty when nothing more exists.
	NextCursor string `json:"next_cursor,omitempty"`
	// Truncated names the jobs of this reply whose args and result were
	// left out because the job alone would not fit in a reply.
	Truncated []string `json:"truncated,omitempty"`
	// Pruned is how many jobs a prune request removed.
	Pruned int `json:"pruned,omitempty"`
	// Stats answers stats.
	Stats *fairway.Stats `json:"stats,omitempty"`
	// Bulk answers bulk.
	Bulk *BulkResult `json:"bulk,omitempty"`
	// Partitions answers partitions.
	Partitions []fairway.Partition `json:"partitions,omitempty"`
}

// LimitRequest is the body of limit-set (kind, name, max) and
// limit-delete (kind, name): a concurrency limit of a task or a group
// ("*": every group without a limit of its own).
type LimitRequest struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Max  *int   `json:"max,omitempty"`
}

// StatsRequest is the body of stats: the window to look back over and the
// width of its buckets, as Go durations ("1h", "1m"; defaults: an hour,
// and a sixtieth of the window); Group narrows the operator API's answer
// to one group (the tenant API answers for the subject's group only).
type StatsRequest struct {
	Window string `json:"window,omitempty"`
	Bucket string `json:"bucket,omitempty"`
	Group  string `json:"group,omitempty"`
}

// Bounds of stats, which the coordinators refuse beyond (a stats request
// reads every job that ended in its window, so its cost grows with the
// window; the buckets bound its answer).
const (
	StatsWindowDefault = time.Hour
	StatsWindowMax     = 31 * 24 * time.Hour // 744h
	StatsBucketMin     = time.Second
	StatsBucketsMax    = 1440 // a day of minutes
)

// Durations reads the window and the bucket of r, with their defaults (an
// hour; a sixtieth of the window, at least StatsBucketMin), in whole
// seconds, and checks them against the bounds above: an error names the
// field and the range allowed. Equivalent requests ("60m", "1h", "3600s")
// read the same.
func (r StatsRequest) Durations() (window, bucket time.Duration, err error) {
	parse := func(field, text string, def time.Duration) (time.Duration, error) {
		if text == "" {
			return def, nil
		}
		v, err := time.ParseDuration(text)
		if err != nil || v <= 0 {
			return 0, fairway.Invalid(field, "%q is not a positive duration such as 1h or 1m", text)
		}
		return v, nil
	}
	if window, err = parse("window", r.Window, StatsWindowDefault); err != nil {
		return 0, 0, err
	}
	window = window.Truncate(time.Second)
	if window < time.Second || window > StatsWindowMax {
		return 0, 0, fairway.Invalid("window", "%s is not within 1s..%s (31 days)", window, StatsWindowMax)
	}
	if bucket, err = parse("bucket", r.Bucket, max(StatsBucketMin, window/60)); err != nil {
		return 0, 0, err
	}
	bucket = bucket.Truncate(time.Second)
	switch {
	case bucket < StatsBucketMin:
		return 0, 0, fairway.Invalid("bucket", "%s is shorter than %s", r.Bucket, StatsBucketMin)
	case bucket > window:
		return 0, 0, fairway.Invalid("bucket", "%s is longer than the window (%s)", bucket, window)
	case window/bucket > StatsBucketsMax:
		return 0, 0, fairway.Invalid("bucket", "%s makes %d buckets of a %s window; at most %d: choose a bucket of at least %s",
			bucket, window/bucket, window, StatsBucketsMax, (window+StatsBucketsMax-1)/StatsBucketsMax)
	}
	return window, bucket, nil
}

// Bulk actions.
const (
	BulkCancel  = "cancel"
	BulkRetry   = "retry"
	BulkRelease = "release"
)

// BulkLimitDefault and BulkLimitMax bound the jobs one bulk request acts on.
const (
	BulkLimitDefault = 1000
	BulkLimitMax     = 5000
)

// BulkRequest is the body of bulk: Action (cancel, retry or release) on
// every job Filter matches, newest first, at most Limit of them (default
// 1,000, at most 5,000; ask again for more). Preview counts the matching
// jobs, up to Limit, and changes nothing. Filter's cursor, limit and full
// are ignored.
type BulkRequest struct {
	Action  string      `json:"action"`
	Filter  ListRequest `json:"filter"`
	Preview bool        `json:"preview,omitempty"`
	Limit   int         `json:"limit,omitempty"`
}

// BulkResult is the answer to bulk: how many jobs matched (up to the
// limit; More says whether others match beyond it), how many the action
// changed, and the first errors of those it could not (a job that ended
// meanwhile, say), with their job ids.
type BulkResult struct {
	Matched int              `json:"matched"`
	More    bool             `json:"more,omitempty"`
	Changed int              `json:"changed"`
	Errors  []*fairway.Error `json:"errors,omitempty"`
}

// PauseCommand is the body of pause (operators only), which the
// coordinators pass on to the executor on <p>.executor.<app-id>.pause: it
// stops taking jobs (of Task, or of every task when Task is empty), its
// running jobs finish; Resume undoes it.
type PauseCommand struct {
	Executor string `json:"executor"`
	Task     string `json:"task,omitempty"`
	Resume   bool   `json:"resume,omitempty"`
}

// DrainRequest is the body of drain (operators only): the executor to
// drain. It stops taking jobs, finishes the ones it runs, deregisters and
// exits, as on SIGTERM.
type DrainRequest struct {
	Executor string `json:"executor"`
}

// PruneRequest is the body of prune (operators only): remove one batch of
// finished jobs in State that ended more than OlderThan ago (a Go
// duration: 720h, 30m), of Group ("" for all), at most Limit (default
// 1,000, at most 10,000). Ask again while Pruned equals the limit.
type PruneRequest struct {
	State     fairway.State `json:"state"`
	OlderThan string        `json:"older_than"`
	Group     string        `json:"group,omitempty"`
	Limit     int           `json:"limit,omitempty"`
}

// JobRequest is the body of cancel, get, logs, release and priority.
type JobRequest struct {
	// Group is the job's group: required on the operator API
	// (<p>.admin.<verb>), since job ids are unique per group only. On the
	// tenant API (<p>.api.<group>.<verb>) the subject names the group, and
	// a body naming another group is refused.
	Group string `json:"group,omitempty"`
	ID    string `json:"id"`
	// Priority is the new priority, for the priority verb.
	Priority fairway.Priority `json:"priority,omitempty"`
}

// WaitRequest is the body of wait: the job (as JobRequest names it) and
// how long to hold the request for it to end.
type WaitRequest struct {
	Group string `json:"group,omitempty"`
	ID    string `json:"id"`
	// WaitMS is how long the coordinator holds the request for the job to
	// end, at most MaxWaitMS (0: MaxWaitMS). The reply's job is final, or
	// the wait ran out first: ask again. Give the request a timeout a few
	// seconds longer.
	WaitMS int `json:"wait_ms,omitempty"`
}

// MaxWaitMS bounds a wait request's wait_ms: a longer wait is several
// requests.
const MaxWaitMS = 30_000

// ListRequest is the body of list. Empty fields match everything.
type ListRequest struct {
	Group    string           `json:"group,omitempty"` // admin only; the tenant API uses the subject's group
	Task     string           `json:"task,omitempty"`
	State    fairway.State    `json:"state,omitempty"`
	Priority fairway.Priority `json:"priority,omitempty"`
	// Since and Until bound the jobs' submission time (RFC 3339).
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// Text keeps the jobs whose args or error contain it (ignoring case).
	// It reads every job the other filters leave: narrow them first.
	Text string `json:"text,omitempty"`
	// Limit caps the answer (newest first). Defaults to 100, at most 1000.
	// A reply may hold fewer (it is capped in bytes): follow NextCursor.
	Limit int `json:"limit,omitempty"`
	// Cursor continues a previous answer: its Reply.NextCursor.
	Cursor string `json:"cursor,omitempty"`
	// Full includes each job's args and result (left out by default).
	Full bool `json:"full,omitempty"`
}

// LogsRequest is the body of logs: the job, as in JobRequest, and a page.
type LogsRequest struct {
	// Group is the job's group, as in JobRequest.
	Group string `json:"group,omitempty"`
	ID    string `json:"id"`
	// Limit caps the lines of the answer (oldest first). Defaults to 1000,
	// at most 10000. A reply may hold fewer: follow NextCursor.
	Limit int `json:"limit,omitempty"`
	// Cursor continues a previous answer: its Reply.NextCursor.
	Cursor string `json:"cursor,omitempty"`
}

// DispatchRequest is an executor asking for up to Slots jobs.
type DispatchRequest struct {
	Executor string   `json:"executor"`
	Instance string   `json:"instance"`
	Slots    int      `json:"slots"`
	Tasks    []string `json:"tasks"`
	// WaitMS lets the coordinator hold the request for up to this many
	// milliseconds when no job is eligible, and answer as soon as one is
	// (a long poll): new work then starts without another round trip.
	WaitMS int `json:"wait_ms,omitempty"`
	// RequestID names the request. A request that got no answer (timed
	// out, connection lost) is sent again with the same id: the coordinator
	// then answers with the jobs it had already claimed under that id, if
	// any are still scheduled, instead of claiming more.
	RequestID string `json:"request_id,omitempty"`
	// TaskSlots caps, per task, the jobs of it this request may get: the
	// executor's free slots for a task it runs with a max-concurrent
	// (below Slots). A task absent is bounded by Slots only; a task with
	// no free slot is left out of Tasks instead.
	TaskSlots map[string]int `json:"task_slots,omitempty"`
	// Groups, when set, asks for jobs of these groups only (an executor
	// that serves some tenants). The executor credential's grant narrows
	// it (Grant.Groups); an empty list gets no job.
	Groups []string `json:"groups,omitempty"`
	// Idle, when set, says how many of Slots would start a job at once
	// (free slots); the rest would be held until a slot frees (prefetch).
	// While an executor with an idle slot waits for a job, the leader
	// hands none to one that would only hold it. Unset: all of them.
	Idle *int `json:"idle,omitempty"`
	// Stopping says the instance stops: the leader answers its parked
	// request empty, hands it no job from now on, and the jobs it then
	// releases give their attempt back (they count none). An executor
	// sends it, and waits for the answer, before it releases the jobs it
	// holds; Slots and Tasks are then ignored.
	Stopping bool `json:"stopping,omitempty"`
}

// DispatchReply hands jobs to an executor. The jobs are scheduled for it,
// held while its heartbeats come; the executor must report on each.
type DispatchReply struct {
	Error *fairway.Error `json:"error,omitempty"`
	Jobs  []fairway.Job  `json:"jobs,omitempty"`
}

// RegisterRequest announces an executor before it takes work.
type RegisterRequest struct {
	Executor fairway.Executor `json:"executor"`
}

// DeregisterRequest tells the coordinators that an executor instance shut
// down gracefully: it is no longer live, and its tasks no longer count as
// run. Sent under the executor's own app-id; only the registered instance
// is deregistered.
type DeregisterRequest struct {
	Executor string `json:"executor"`
	Instance string `json:"instance"`
}

// Heartbeat tells the coordinators an executor is alive and which jobs it
// holds, each named by group and id; their leases are extended where this
// instance holds them.
type Heartbeat struct {
	Executor string           `json:"executor"`
	Instance string           `json:"instance"`
	Jobs     []fairway.JobRef `json:"jobs"`
	Slots    int              `json:"slots"`
}

// The kinds of Report.
const (
	ReportStarted  = "started"
	ReportProgress = "progress"
	ReportLog      = "log"
	ReportDone     = "done"
)

// The outcomes of a done Report (see fairway.Outcome).
const (
	OutcomeSuccess   = fairway.OutcomeSuccess
	OutcomeError     = fairway.OutcomeError
	OutcomePermanent = fairway.OutcomePermanent
	OutcomeCancelled = fairway.OutcomeCancelled
	OutcomeReleased  = fairway.OutcomeReleased
	OutcomeSnoozed   = fairway.OutcomeSnoozed
)

// Report is what an executor says about a job it holds. Executors publish
// reports to <p>.results.<app-id> as a JSON array of one or more, in the
// order they happened; a single object is accepted too. A report applies
// only when it names the job's group, id and current attempt, and comes
// from the executor instance that holds that attempt.
type Report struct {
	Type    string `json:"type"`
	Group   string `json:"group"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Executor is the executor's app-id, Instance its instance id (as
	// registered).
	Executor string          `json:"executor"`
	Instance string          `json:"instance"`
	Time     time.Time       `json:"time"`
	Progress int             `json:"progress,omitempty"`
	Outcome  fairway.Outcome `json:"outcome,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Snooze, with the outcome snoozed, is when the job is due again: a
	// Go duration from 1s ("30s", "15m").
	Snooze string            `json:"snooze,omitempty"`
	Logs   []fairway.LogLine `json:"logs,omitempty"`
	// Started, in a done report, is when the attempt started, for an
	// executor that did not send a started report: a short job's start
	// folds into its end (one report, and one write of the job, instead
	// of two). A started report sent before wins.
	Started *time.Time `json:"started,omitempty"`
	// RanMS, in a done report, is how long the handler ran, in
	// milliseconds by the executor's clock (absent: it did not start).
	// When fairness counts time, the coordinators charge each group what
	// its jobs ran (scheduler.fairness).
	RanMS float64 `json:"ran_ms,omitempty"`
}

// CancelCommand asks an executor to cancel one attempt of a job it holds:
// all three fields are required. An executor ignores a command whose
// attempt is not the one it holds (there is no "any attempt"), and
// remembers for a while one about a job it does not hold yet, for that
// exact attempt.
type CancelCommand struct {
	Group   string `json:"group"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}

// DecodeReports decodes a results message: a JSON array of reports, or one
// report object. Text PostgreSQL cannot store (a NUL, bytes that are not
// UTF-8) is replaced by U+FFFD, in the result too, and a number in the
// result that PostgreSQL cannot hold becomes a string: an outcome is
// stored rather than refused for its error message or result.
func DecodeReports(data []byte) ([]Report, error) {
	data = bytes.TrimSpace(data)
	var reports []Report
	if len(data) > 0 && data[0] == '[' {
		if err := wirejson.Unmarshal(data, &reports); err != nil {
			return nil, err
		}
	} else {
		var r Report
		if err := wirejson.Unmarshal(data, &r); err != nil {
			return nil, err
		}
		reports = []Report{r}
	}
	for i := range reports {
		reports[i].clean()
	}
	return reports, nil
}

// clean replaces the text of r that PostgreSQL cannot store.
func (r *Report) clean() {
	for _, s := range []*string{&r.Type, &r.JobID, &r.Executor, &r.Error} {
		*s = fairway.CleanText(*s)
	}
	r.Outcome = fairway.Outcome(fairway.CleanText(string(r.Outcome)))
	r.Result = fairway.CleanJSON(r.Result)
	for i := range r.Logs {
		l := &r.Logs[i]
		l.JobID, l.Level, l.Message = fairway.CleanText(l.JobID), fairway.CleanText(l.Level), fairway.CleanText(l.Message)
	}
}

// DeadlineHeader carries a request's deadline, in Unix milliseconds: the
// coordinator stops working on the request then (a submission over its
// group's rate waits for it at most until then). A request without it is
// bounded by the coordinator's own timeouts.
const DeadlineHeader = "Fairway-Deadline"

// SetDeadline writes ctx's deadline, if any, into msg's DeadlineHeader.
func SetDeadline(ctx context.Context, msg *nats.Msg) {
	d, ok := ctx.Deadline()
	if !ok {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(DeadlineHeader, strconv.FormatInt(d.UnixMilli(), 10))
}

// LaneHeader names the lane of the operator API a request waits in on a
// coordinator: each lane's requests run one at a time (by default) and
// apart from the other lanes', so the requests of one lane never queue
// behind another's. Only the operator API reads it (an operator's
// credential is trusted to pick its lane; a tenant's requests wait in their
// group's lane, whatever they say); a request without it, or naming no lane
// the coordinators know, waits in the operator lane.
const LaneHeader = "Fairway-Lane"

// The lanes of the operator API besides the operator's own: a web server
// (fairway web) sends its read-only users' requests in one and its admins'
// in the other, so that no read-only user delays an admin or an operator.
const (
	LaneWebReadOnly = "web-readonly"
	LaneWebAdmin    = "web-admin"
)

type laneKey struct{}

// WithLane returns ctx with a lane that the Client's requests made with it
// name in their LaneHeader.
func WithLane(ctx context.Context, lane string) context.Context {
	return context.WithValue(ctx, laneKey{}, lane)
}

// SetLane writes ctx's lane, if any, into msg's LaneHeader.
func SetLane(ctx context.Context, msg *nats.Msg) {
	lane, _ := ctx.Value(laneKey{}).(string)
	if lane == "" {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(LaneHeader, lane)
}

// Lane reads msg's LaneHeader: "" if it has none.
func Lane(msg *nats.Msg) string { return msg.Header.Get(LaneHeader) }

// Deadline reads msg's DeadlineHeader: false if it has none, or not a
// number.
func Deadline(msg *nats.Msg) (time.Time, bool) {
	v := msg.Header.Get(DeadlineHeader)
	if v == "" {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Fair shares and rate limits (operators): see docs/architecture.md, "Fair
// shares".
const (
	VerbGroups     = "groups"      // admin only; body: GroupsRequest; each group's share of slot-time
	VerbWeightSet  = "weight-set"  // admin only; body: WeightRequest
	VerbRateSet    = "rate-set"    // admin only; body: RateRequest
	VerbRateDelete = "rate-delete" // admin only; body: RateRequest (scope only)
)

// GroupsRequest is the body of groups: the window to measure the shares
// over (a Go duration, "1h" by default, at most 24h).
type GroupsRequest struct {
	Window string `json:"window,omitempty"`
}

// WeightRequest is the body of weight-set: a group's weight (above 0, at
// most 1000; 1 is the default).
type WeightRequest struct {
	Group  string  `json:"group"`
	Weight float64 `json:"weight"`
}

// RateRequest is the body of rate-set (scope and rate) and rate-delete
// (scope): a rate limit of "task:T", "group:G" ("group:*": each group) or
// both ("task:send-mail,group:*"), at most rate job starts ("10/s",
// "100/m").
type RateRequest struct {
	Scope string `json:"scope"`
	Rate  string `json:"rate,omitempty"`
}
