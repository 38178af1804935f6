package fairway

import "time"

// Stats is what the dashboard charts, computed from the jobs PostgreSQL
// keeps (no Prometheus needed): finished jobs per time bucket, wait and run
// times, how many slots and how many waiting jobs each group had over the
// window, and the queue now. Jobs pruned by retention are not in it.
type Stats struct {
	// Since is the start of the window and Now its end (PostgreSQL's clock).
	Since time.Time `json:"since"`
	Now   time.Time `json:"now"`
	// BucketSeconds is the width of each bucket; Buckets[i] starts at
	// Since + i×BucketSeconds.
	BucketSeconds int         `json:"bucket_seconds"`
	Buckets       []time.Time `json:"buckets"`
	// Finished counts jobs that ended in the window, per bucket, group,
	// task and final state (rows with a count of 0 are left out).
	Finished []FinishedCount `json:"finished"`
	// Tasks has wait and run times per task over the window: wait from a
	// job's due time (submitted, or the run_at it was delayed to) to its
	// start, run from start to end, of the jobs that started (wait) or
	// ended (run) in the window.
	Tasks []TaskTimes `json:"tasks"`
	// All is Tasks over every task.
	All TaskTimes `json:"all"`
	// Groups has, per group and bucket, the average number of its jobs
	// that were running (the slots it held) and waiting (due, not yet
	// started). A job's earlier attempts are not counted, only its last.
	Groups []GroupSeries `json:"groups"`
	// Queue is the jobs not final now, per group, task and state.
	Queue []QueueCount `json:"queue"`
}

// FinishedCount is how many jobs of a group and task ended in one state
// within one bucket of Stats.
type FinishedCount struct {
	Bucket int    `json:"bucket"` // index into Stats.Buckets
	Group  string `json:"group"`
	Task   string `json:"task"`
	State  State  `json:"state"`
	Jobs   int64  `json:"jobs"`
}

// TaskTimes are a task's wait and run time percentiles, in seconds.
type TaskTimes struct {
	Task    string  `json:"task,omitempty"`
	Started int64   `json:"started"` // jobs started in the window
	Ended   int64   `json:"ended"`   // jobs that ended in the window, with a start
	WaitP50 float64 `json:"wait_p50"`
	WaitP99 float64 `json:"wait_p99"`
	RunP50  float64 `json:"run_p50"`
	RunP99  float64 `json:"run_p99"`
}

// GroupSeries is one group's running and waiting jobs per bucket of Stats
// (averages over the bucket).
type GroupSeries struct {
	Group   string    `json:"group"`
	Running []float64 `json:"running"`
	Waiting []float64 `json:"waiting"`
}

// QueueCount is how many jobs of a group and task are in one state that is
// not final, and for waiting and stuck jobs how long the oldest due one has
// been due.
type QueueCount struct {
	Group            string  `json:"group"`
	Task             string  `json:"task"`
	State            State   `json:"state"`
	Jobs             int64   `json:"jobs"`
	OldestDueSeconds float64 `json:"oldest_due_seconds"`
}
