package journal

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unique"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
)

// State is a partition's unfinished jobs as its journal says them: the
// fold of its rows in the tail's order. The leader holds one in memory;
// any reader rebuilds the same from PostgreSQL alone (a snapshot and the
// rows after it), since Apply is a pure function of the state and the row.
// It holds no job's arguments: a job names the row and the item that
// carry them (condition 6 of issue 31).
type State struct {
	// Jobs are the unfinished jobs; a job that ends leaves it.
	Jobs *Jobs `json:"-"`
	// Dependents are, per job, the ids of its group's jobs that wait
	// for it.
	Dependents map[fairway.JobRef][]string `json:"dependents,omitempty"`
	// DependsOn are, per group, its unfinished jobs submitted with
	// dependencies: each one's depends_on as submitted (Waits loses those
	// that succeed), for the API's graphs: a job's dependents that did
	// not end are found here once it ended, and its ended ones from
	// their records.
	DependsOn map[string]map[string][]string `json:"depends_on,omitempty"`
	// NamedBy is DependsOn the other way: per job (unfinished or ended),
	// the unfinished jobs of its group whose depends_on names it (no
	// empty entries). Kept with DependsOn, counted anew by Restore.
	NamedBy map[fairway.JobRef]map[string]struct{} `json:"-"`
	// Paused are the groups whose claims stop.
	Paused map[string]bool `json:"paused,omitempty"`
	// Cursor is the fair selection's position after the last claim: the
	// group of its last job and the counting scheme's step, moved by each
	// item of a claimed row (the leader writes them in the order it picked
	// them), whether the item applied or not.
	Cursor fairness.Cursor `json:"cursor"`
	// HeldTasks and HeldGroups count the jobs executors hold (scheduled or
	// running) per task and per group, for the concurrency limits (no
	// zero entries). Kept by the fold, counted anew by Restore.
	HeldTasks  map[string]int `json:"-"`
	HeldGroups map[string]int `json:"-"`
	// Live counts each group's unfinished jobs (no zero entries), for the
	// quota of jobs a group may have queued (coordinator.Config.QuotaJobs):
	// Counts summed per group, kept with it so that a quota's check costs
	// no sum.
	Live map[string]int `json:"-"`
	// Rows counts the unfinished jobs each submitted row carries (no zero
	// entries): the rows the journal's retention keeps (PruneJournal),
	// since their jobs' arguments are there. Kept by the fold, counted
	// anew by a restore.
	Rows map[int64]int32 `json:"-"`
	// Counts counts the unfinished jobs by group, task and state, for the
	// gauges and the stats (Leader.Counts), without a walk of the jobs:
	// kept from each change the fold makes, counted anew by a restore.
	Counts map[CountKey]int `json:"-"`
	// Held are the jobs each executor's instance holds: the bound on what
	// one instance may hold (ClaimParams.MaxHeld) counts them, and the
	// releases (Leader.Release, ReleaseLost, ReleaseOverdue) walk them
	// rather than every job, of which a partition may have millions
	// waiting. Kept and counted anew as HeldTasks; no empty entries.
	Held map[Instance]map[fairway.JobRef]struct{} `json:"-"`
	// Claims are the jobs each dispatch request that named its id
	// (ClaimParams.ClaimID) claimed, in the order claimed, while it still
	// holds one of them (ClaimHeld counts them): a request sent again gets
	// those it holds (ClaimedBy). A job that leaves stays in its claim's
	// list until the claim holds none, so that a job's end costs no walk
	// of a list of up to a claim's size (a claim's many ends were
	// quadratic). Kept and counted anew as HeldTasks.
	Claims    map[ClaimKey][]fairway.JobRef `json:"-"`
	ClaimHeld map[ClaimKey]int              `json:"-"`
	// Trackers are the live jobs that hold a tracker (a key of the
	// submitter's, or UniqueBy's): tracker, by group, to the job's id.
	// While one holds it, a submission of the same tracker in its group
	// is rejected by the fold, naming the holder: one live job a tracker
	// in a group. TrackerOf is the other way.
	Trackers  map[fairway.JobRef]string `json:"trackers,omitempty"`
	TrackerOf map[fairway.JobRef]string `json:"-"`
	// Shares are the fair shares' book: the groups' weights (Weight rows),
	// virtual times and the clock (moved by the charges of claimed items),
	// and the run times learned from ended items that carry them.
	Shares *fairness.Book `json:"-"`
	// Rates are the rate limits (Rate rows) and their token buckets, taken
	// from by the jobs that claimed rows started, at each row's time.
	Rates *fairness.RateBook `json:"-"`
	// ended, when set (a scratch state: State.endedBy), is told of each
	// job that ends, as it was before its end and with the item that
	// ended it.
	ended func(ref fairway.JobRef, j Job, c Change, it Item)
}

// Holder is the executor's instance that holds a job, and when: claimed
// (the claimed row's time) and started (as the executor reported it, or
// the started row's time; 0 until then), microseconds since the Unix
// epoch, for the job's record.
type Holder struct {
	Executor  string `json:"executor"`
	Instance  string `json:"instance"`
	Scheduled int64  `json:"scheduled"`
	Started   int64  `json:"started,omitempty"`
	// Claim is the id of the dispatch request that claimed it ("": none).
	Claim string `json:"claim,omitempty"`
}

// ClaimKey names a dispatch request: its instance and its id.
type ClaimKey struct {
	Instance
	Claim string
}

// Change is a job's change of state that applying a row made: what the
// events announce, and, for a final state, what its record says. From ==
// To is a change of something else (its priority), which the leader's
// queues follow.
type Change struct {
	Job   fairway.JobRef
	From  fairway.State // "" for a new job
	To    fairway.State
	Error string
	// Task and Attempt are the job's (its attempt after the change);
	// Executor is the app-id of the executor that held it before the
	// change, or that a claim hands it to.
	Task     string
	Attempt  int32
	Executor string
	// Unknown are a new job's dependencies that the state does not hold
	// (they ended before its row was read): the leader looks up their
	// records and appends a Resolved row.
	Unknown []string
	// Dependents are, for a job that ended, the ids of its group's jobs
	// that waited for it: the leader appends a Resolved row for them
	// (with an error when it did not succeed). The fold never releases or
	// cancels them itself: a submission that waits for a job, appended
	// by any coordinator, may be read before or after that job's end, and
	// both orders must fold to the same state (docs/journal.md, "Who
	// appends what").
	Dependents []string
	// Refusal is, for a submission the fold rejected (To
	// StateRejected), why: its tracker is held (fairway.Duplicate).
	Refusal *fairway.Error
}

// NewState is an empty partition.
func NewState() *State {
	return &State{Jobs: NewJobs(), Dependents: map[fairway.JobRef][]string{}, DependsOn: map[string]map[string][]string{},
		NamedBy: map[fairway.JobRef]map[string]struct{}{}, Paused: map[string]bool{},
		HeldTasks: map[string]int{}, HeldGroups: map[string]int{}, Live: map[string]int{}, Rows: map[int64]int32{}, Counts: map[CountKey]int{}, Held: map[Instance]map[fairway.JobRef]struct{}{}, Claims: map[ClaimKey][]fairway.JobRef{}, ClaimHeld: map[ClaimKey]int{},
		Trackers: map[fairway.JobRef]string{}, TrackerOf: map[fairway.JobRef]string{}, Shares: fairness.NewBook(), Rates: fairness.NewRateBook()}
}

// CountKey is what State.Counts counts unfinished jobs by.
type CountKey struct {
	Group, Task string
	State       fairway.State
}

// counted says whether a job in state is counted in State.Counts: it is
// unfinished.
func counted(state fairway.State) bool {
	return state != "" && state != fairway.StateRejected && !state.Final()
}

// countChange moves a job from its change's state to its new one in
// s.Counts, and counts it in or out of s.Live when it comes or ends.
func (s *State) countChange(c *Change) {
	from, to := counted(c.From), counted(c.To)
	if c.From == c.To {
		return
	}
	if from {
		count(s.Counts, CountKey{c.Job.Group, c.Task, c.From}, -1)
	}
	if to {
		count(s.Counts, CountKey{c.Job.Group, c.Task, c.To}, 1)
	}
	switch {
	case to && !from:
		count(s.Live, c.Job.Group, 1)
	case from && !to:
		count(s.Live, c.Job.Group, -1)
	}
}

// Apply folds a row into the state and returns the changes it made, in
// the order of its items (a cascade after the item that caused it). Items
// that do not apply (a stale attempt's report, a claim of a job that is
// no longer waiting, a duplicate) change nothing: the row is what was
// committed, and the fold decides what it means, the same way for every
// reader.
func (s *State) Apply(row Row) ([]Change, error) {
	items, err := Decode(row.Body)
	if err != nil {
		return nil, fmt.Errorf("journal row %d (%s): %w", row.ID, row.Kind, err)
	}
	return s.apply(row, items)
}

// apply folds row, whose body is items.
func (s *State) apply(row Row, items []Item) ([]Change, error) {
	var out []Change
	var runs []fairness.Ran        // the row's ended attempts that carry their run times
	var started []fairness.Started // the jobs a claimed row started
	for i, it := range items {
		ref := fairway.JobRef{Group: intern(it.Group), ID: it.ID}
		j := s.Jobs.Get(ref)
		executor := ""
		if j != nil && j.Holder != nil {
			executor = j.Holder.Executor
		}
		n := len(out)
		var err error
		out, err = s.applyItem(row, i, it, ref, j, out, &runs, &started)
		if err != nil {
			return out, err
		}
		// What the events say of the job besides its states: its task,
		// its attempt, and the executor that held it (or takes it).
		for k := n; k < len(out); k++ {
			c := &out[k]
			if j == nil {
				j = s.Jobs.Get(ref) // a new job
			}
			if j != nil {
				c.Task, c.Attempt = j.Task, j.Attempt
			}
			c.Executor = executor
			if row.Kind == Claimed {
				c.Executor = intern(it.Executor)
			}
			s.countChange(c)
		}
	}
	// The row's run times, learned as one batch (fairness.Book.Learn).
	s.Shares.Learn(runs)
	// The rate limits' buckets, taken from at the row's time (stamped by
	// PostgreSQL).
	s.Rates.Take(started, row.At.UnixMicro())
	return out, nil
}

// applyItem folds item i of row (it, of job ref, j in the state or nil)
// and returns out with its changes; runs and started gather what the row
// teaches the fair shares and the rate limits.
func (s *State) applyItem(row Row, i int, it Item, ref fairway.JobRef, j *Job, out []Change, runs *[]fairness.Ran, started *[]fairness.Started) ([]Change, error) {
	switch row.Kind {
	case Submitted, Retried:
		if j != nil {
			return out, nil
		}
		if it.Tracker != "" {
			key := fairway.JobRef{Group: ref.Group, ID: it.Tracker}
			if holder, held := s.Trackers[key]; held {
				refusal := fairway.Duplicate(it.Tracker, holder)
				return append(out, Change{Job: ref, To: fairway.StateRejected, Task: intern(it.Task), Error: refusal.Message, Refusal: refusal}), nil
			}
			s.Trackers[key] = ref.ID
			s.TrackerOf[ref] = it.Tracker
		}
		attempt := int32(0)
		if row.Kind == Retried {
			attempt = it.Attempt // a retry by hand goes on counting
		}
		out = append(out, s.add(ref, it, attempt, row.ID, int32(i))) //nolint:gosec // G115: a batch holds far fewer than 2^31 items
	case Priority:
		if j != nil && it.Priority != "" && it.Priority != j.Priority() {
			j.setPriority(it.Priority)
			out = append(out, Change{Job: ref, From: j.State(), To: j.State()})
		}
	case Claimed:
		s.Cursor.Group, s.Cursor.Counter = intern(it.Group), s.Cursor.Counter+1
		if j == nil || !claimable(j.State()) || s.Paused[it.Group] || it.Attempt != j.Attempt+1 {
			return out, nil
		}
		from := j.State()
		j.setState(fairway.StateScheduled)
		j.Attempt, j.Progress = it.Attempt, 0
		j.Holder = &Holder{Executor: intern(it.Executor), Instance: intern(it.Instance), Scheduled: row.At.UnixMicro(), Claim: it.Claim}
		s.hold(ref, j, 1)
		if it.Charge != 0 {
			s.Shares.Charge(ref.Group, it.Charge)
		}
		*started = append(*started, fairness.Started{Task: j.Task, Group: ref.Group})
		out = append(out, Change{Job: ref, From: from, To: j.State()})
	case Started:
		if j == nil || j.State() != fairway.StateScheduled || !j.heldBy(it) {
			return out, nil
		}
		j.setState(fairway.StateRunning)
		// As its executor reported it, kept between its claim and
		// this row: a skewed executor cannot move it far.
		at := row.At.UnixMicro()
		j.Holder.Started = min(max(cmp.Or(it.RunAt, at), j.Holder.Scheduled), at)
		out = append(out, Change{Job: ref, From: fairway.StateScheduled, To: j.State()})
	case Progress:
		if j == nil || !held(j.State()) || !j.heldBy(it) {
			return out, nil
		}
		j.Progress = progressOf(it.Progress)
	case Ended:
		if j == nil || !held(j.State()) || !j.heldBy(it) {
			return out, nil
		}
		if it.RanMS > 0 {
			*runs = append(*runs, fairness.Ran{Group: ref.Group, Task: j.Task, MS: it.RanMS})
		}
		out = s.end(out, ref, j, it)
	case Released:
		if j == nil || !held(j.State()) || !j.heldBy(it) {
			return out, nil
		}
		if it.RanMS > 0 {
			*runs = append(*runs, fairness.Ran{Group: ref.Group, Task: j.Task, MS: it.RanMS})
		}
		if it.Counted {
			// Lost with its executor: an attempt that failed.
			it.Outcome, it.RunAt = OutcomeError, cmp.Or(it.RunAt, j.RunAt)
			out = s.end(out, ref, j, it)
			return out, nil
		}
		from := j.State()
		s.hold(ref, j, -1)
		j.setState(fairway.StateWaiting)
		j.Holder, j.Progress = nil, 0
		if it.GiveBack {
			j.Attempt = it.Attempt - 1 // its instance stops: the next claim runs it under this number
		}
		out = append(out, Change{Job: ref, From: from, To: j.State(), Error: it.Error})
	case Cancel:
		switch {
		case j == nil || j.CancelRequested():
		case held(j.State()):
			j.setCancelRequested(true)
		default:
			out = s.finish(out, ref, j, fairway.StateCancelled, it.Error, it)
		}
	case Resolved:
		if j == nil || j.State() != fairway.StatePending {
			return out, nil
		}
		if it.Error != "" {
			out = s.finish(out, ref, j, fairway.StateCancelled, it.Error, it)
			return out, nil
		}
		j.setWaits(slices.DeleteFunc(j.Waits(), func(w string) bool { return slices.Contains(it.Waits, w) }))
		if len(j.Waits()) == 0 {
			j.setState(fairway.StateWaiting)
			out = append(out, Change{Job: ref, From: fairway.StatePending, To: j.State()})
		}
	case Release:
		if j == nil || j.State() != fairway.StatePending || len(j.Waits()) > 0 {
			return out, nil
		}
		j.setState(fairway.StateWaiting)
		if j.Triggered() {
			// Due now, at the release row's time (RunAt was its
			// trigger), unless it was due earlier.
			j.setTriggered(false)
			j.RunAt = min(j.RunAt, row.At.UnixMicro())
		}
		out = append(out, Change{Job: ref, From: fairway.StatePending, To: j.State()})
	case Expired:
		if j == nil || held(j.State()) {
			return out, nil
		}
		out = s.finish(out, ref, j, fairway.StateFailed, "expired", it)
	case Paused:
		s.Paused[it.Group] = true
	case Resumed:
		delete(s.Paused, it.Group)
	case Weight:
		s.Shares.SetWeight(ref.Group, it.Weight)
	case Rate:
		s.Rates.Set(fairness.RateLimit{Task: it.Task, Group: it.Group, Starts: it.Starts, Period: time.Duration(it.PeriodMS) * time.Millisecond})
	default:
		return out, fmt.Errorf("journal row %d: unknown kind %q", row.ID, row.Kind)
	}
	return out, nil
}

// add makes a new job of a Submitted or Retried item.
func (s *State) add(ref fairway.JobRef, it Item, attempt int32, row int64, index int32) Change {
	j := NewJob(intern(it.Task), fairway.StateWaiting, row, index)
	j.setPriority(it.Priority)
	j.RunAt, j.MaxRetries, j.Attempt, j.TimeoutS = it.RunAt, retryCount(it.MaxRetries), attempt, timeoutSeconds(it.Timeout)
	j.setExpiresAt(it.ExpiresAt)
	j.setWaits(slices.Clone(it.Waits))
	if it.Pending || len(j.Waits()) > 0 {
		j.setState(fairway.StatePending)
		j.setTriggered(it.Trigger && len(j.Waits()) == 0)
	}
	s.Jobs.put(ref, j)
	s.Rows[row]++
	if len(it.Waits) > 0 {
		s.dependsOn(ref, slices.Clone(it.Waits))
	}
	c := Change{Job: ref, To: j.State()}
	for _, d := range j.Waits() {
		dep := fairway.JobRef{Group: ref.Group, ID: d}
		if s.Jobs.Get(dep) == nil {
			// Ended between the submission's check and its row (or
			// never known here): the leader resolves it from the
			// record (a Resolved row).
			c.Unknown = append(c.Unknown, d)
			continue
		}
		s.Dependents[dep] = append(s.Dependents[dep], ref.ID)
	}
	return c
}

// dependsOn sets the dependencies as submitted of ref, a live job (nil:
// it has none, or ended), keeping no empty group.
func (s *State) dependsOn(ref fairway.JobRef, ids []string) {
	g := s.DependsOn[ref.Group]
	for _, d := range g[ref.ID] {
		dep := fairway.JobRef{Group: ref.Group, ID: d}
		delete(s.NamedBy[dep], ref.ID)
		if len(s.NamedBy[dep]) == 0 {
			delete(s.NamedBy, dep)
		}
	}
	for _, d := range ids {
		dep := fairway.JobRef{Group: ref.Group, ID: d}
		if s.NamedBy[dep] == nil {
			s.NamedBy[dep] = map[string]struct{}{}
		}
		s.NamedBy[dep][ref.ID] = struct{}{}
	}
	switch {
	case len(ids) > 0 && g == nil:
		g = map[string][]string{}
		s.DependsOn[ref.Group] = g
		fallthrough
	case len(ids) > 0:
		g[ref.ID] = ids
	case g != nil:
		delete(g, ref.ID)
		if len(g) == 0 {
			delete(s.DependsOn, ref.Group)
		}
	}
}

// timeoutSeconds is a submission's timeout ("30s", "2h") in whole
// seconds, rounded up (0: none, or not a duration: the submission was
// checked before it was appended).
func timeoutSeconds(timeout string) int32 {
	d, err := time.ParseDuration(timeout)
	if err != nil || d <= 0 || d > fairway.MaxTimeout {
		return 0
	}
	return int32((d + time.Second - 1) / time.Second) //nolint:gosec // G115: at most MaxTimeout, 604,800 s
}

// end applies an attempt's end.
func (s *State) end(out []Change, ref fairway.JobRef, j *Job, it Item) []Change {
	s.hold(ref, j, -1)
	switch {
	case it.Outcome == OutcomeSuccess:
		return s.finish(out, ref, j, fairway.StateSuccess, "", it)
	case it.Outcome == OutcomeCancelled || j.CancelRequested():
		return s.finish(out, ref, j, fairway.StateCancelled, it.Error, it)
	case it.Outcome == OutcomeSnooze:
		from := j.State()
		j.setState(fairway.StateWaiting)
		j.RunAt, j.Holder, j.Progress = it.RunAt, nil, 0
		return append(out, Change{Job: ref, From: from, To: j.State()})
	case it.Permanent || j.Retries >= j.MaxRetries:
		return s.finish(out, ref, j, fairway.StateFailed, it.Error, it)
	default:
		from := j.State()
		j.setState(fairway.StateStuck)
		j.RunAt, j.Holder, j.Progress = it.RunAt, nil, 0
		j.Retries++
		return append(out, Change{Job: ref, From: from, To: j.State(), Error: it.Error})
	}
}

// finish ends a job in a final state. Its dependents wait on until the
// leader's Resolved row (see Change.Dependents).
func (s *State) finish(out []Change, ref fairway.JobRef, j *Job, final fairway.State, msg string, it Item) []Change {
	c := Change{Job: ref, From: j.State(), To: final, Error: msg, Dependents: s.Dependents[ref]}
	if s.ended != nil {
		s.ended(ref, *j, c, it)
	}
	out = append(out, c)
	s.Jobs.remove(ref)
	if n := s.Rows[j.Row()]; n > 1 {
		s.Rows[j.Row()] = n - 1
	} else {
		delete(s.Rows, j.Row()) // (a scratch state counts none)
	}
	delete(s.Dependents, ref)
	s.dependsOn(ref, nil)
	if tracker, ok := s.TrackerOf[ref]; ok {
		delete(s.Trackers, fairway.JobRef{Group: ref.Group, ID: tracker})
		delete(s.TrackerOf, ref)
	}
	return out
}

// ClaimedBy are the jobs that the dispatch request key claimed and its
// instance still holds, in the order claimed.
func (s *State) ClaimedBy(key ClaimKey) []fairway.JobRef {
	var out []fairway.JobRef
	seen := map[fairway.JobRef]bool{} // a job released and claimed again under the same id is listed twice
	for _, ref := range s.Claims[key] {
		if j := s.Jobs.Get(ref); j != nil && !seen[ref] && j.Holder != nil && j.Holder.Claim == key.Claim && j.Holder.instance() == key.Instance {
			out = append(out, ref)
			seen[ref] = true
		}
	}
	return out
}

// hold counts job j of ref as held (d 1) or no longer (d -1).
func (s *State) hold(ref fairway.JobRef, j *Job, d int) {
	count(s.HeldTasks, j.Task, d)
	count(s.HeldGroups, ref.Group, d)
	if j.Holder == nil {
		return
	}
	in := j.Holder.instance()
	if d > 0 {
		if s.Held[in] == nil {
			s.Held[in] = map[fairway.JobRef]struct{}{}
		}
		s.Held[in][ref] = struct{}{}
	} else if held := s.Held[in]; held != nil {
		delete(held, ref)
		if len(held) == 0 {
			delete(s.Held, in)
		}
	}
	if j.Holder.Claim == "" {
		return
	}
	key := ClaimKey{Instance: in, Claim: j.Holder.Claim}
	if d > 0 {
		s.Claims[key] = append(s.Claims[key], ref)
	}
	count(s.ClaimHeld, key, d)
	if s.ClaimHeld[key] == 0 {
		delete(s.Claims, key)
	}
}

// count adds d to m[key], keeping no zero entry.
func count[K comparable](m map[K]int, key K, d int) {
	if n := m[key] + d; n > 0 {
		m[key] = n
	} else {
		delete(m, key)
	}
}

// Limits are the concurrency and rate limits for a claim: limits (the
// cluster's concurrency limits, as operators set them), with the jobs
// held now by the state's counts, the state's rate limits (their buckets
// read by the claim as it needs them: Queues.Claim), and the executor's
// own task caps; nil when there are none.
func (s *State) Limits(limits []fairway.Limit, executorCaps map[string]int) *fairness.Limits {
	if len(limits) == 0 && s.Rates.Empty() {
		return fairness.ExecutorLimits(executorCaps)
	}
	l := fairness.NewLimits()
	l.Rates = s.Rates.Rates()
	groupLimits := false
	for _, lim := range limits {
		switch lim.Kind {
		case "task":
			l.SetTask(lim.Name, lim.Max, s.HeldTasks[lim.Name])
		case "group":
			l.SetGroup(lim.Name, lim.Max)
			groupLimits = true
		}
	}
	if groupLimits {
		for g, n := range s.HeldGroups {
			l.SetHeld(g, n)
		}
	}
	return l.WithExecutorCaps(executorCaps)
}

// heldBy says whether a report is of the job's current claim: its
// attempt, by its executor's instance.
func (j *Job) heldBy(it Item) bool {
	return j.Holder != nil && it.Attempt == j.Attempt && it.Executor == j.Holder.Executor && it.Instance == j.Holder.Instance
}

// intern returns the one copy of a string that many jobs share (groups,
// tasks, executors): a million waiting jobs of a hundred groups hold a
// hundred group names.
func intern(s string) string { return unique.Make(s).Value() }

// claimable: a job in this state may be claimed (when due).
func claimable(st fairway.State) bool {
	return st == fairway.StateWaiting || st == fairway.StateStuck
}

// held: an executor holds a job in this state.
func held(st fairway.State) bool {
	return st == fairway.StateScheduled || st == fairway.StateRunning
}
