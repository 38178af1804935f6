package store

import (
	_ "embed"
	"time"

	"github.com/fairwayhq/fairway"
)

// Attempt names one run of a job by one executor instance.
type Attempt struct {
	Group   string
	JobID   string
	Attempt int
	// Executor is the executor's app-id, Instance the instance of it that
	// holds the attempt ('' when the claim named none).
	Executor string
	Instance string
}

// Outcome is how an attempt ended.
type Outcome struct {
	Attempt
	Kind   fairway.Outcome
	Result []byte
	Error  string
	// StartedAt, when set, is when the attempt started: its start was
	// reported along with its end, and is recorded with it.
	StartedAt *time.Time
	// EndedAt is when the attempt ended, by the executor's clock (its
	// report's time; zero: not said), which a final state records as the
	// job's finished time, kept within the attempt's start and the
	// record's write.
	EndedAt time.Time
	// Snooze is how long a snoozed job waits before it is due again.
	Snooze time.Duration
	// RanMS is how long the attempt ran, as its executor measured it (0:
	// not said), which the journal's shares learn.
	RanMS float64
}

// Start is an executor's report that an attempt started.
type Start struct {
	Attempt
	// At is when the attempt started, by the executor's clock (zero: not
	// said; now). It is kept within the attempt's claim and now: an
	// executor's clock ahead or behind, or a false time, cannot make an
	// attempt start before its job was handed out or after the report.
	// An executor reports a start some 25 ms after it (a shorter job's
	// start goes with its end), so the time of the report is late.
	At time.Time
}

// attemptColumns are attempts as the array parameters of a statement.
type attemptColumns struct {
	groups, ids, executors, instances []string
	attempts                          []int32
}

func attemptArrays(as []Attempt) attemptColumns {
	n := len(as)
	c := attemptColumns{groups: make([]string, n), ids: make([]string, n), executors: make([]string, n),
		instances: make([]string, n), attempts: make([]int32, n)}
	for i, a := range as {
		c.groups[i], c.ids[i], c.attempts[i], c.executors[i], c.instances[i] = a.Group, a.JobID, int32(a.Attempt), a.Executor, a.Instance //nolint:gosec // G115: attempts count from 0 to max_retries+1, at most 101
	}
	return c
}
