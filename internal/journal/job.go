package journal

import (
	"slices"

	"github.com/fairwayhq/fairway"
)

// Job is an unfinished job in a State. A leader holds one for every
// waiting job, so it is laid out in 64 bytes (condition 6 of issue 31):
// its state and priority are small numbers, its place in the journal one
// number, its counts bytes, and what few jobs have (an expiry,
// dependencies) behind a pointer that most leave nil. The fold sets it
// through its methods; readers take a copy (leader_read.go).
type Job struct {
	// Task is interned: a million waiting jobs share a few names.
	Task string
	// RunAt: it is not claimed before (Unix µs).
	RunAt int64
	// pos locates the Submitted item that carries its arguments: the
	// row's id and the item's index (Row, Index), which is also its age
	// in its group's lists (oldest first).
	pos int64
	// Holder is the executor's instance that holds it, while scheduled or
	// running.
	Holder *Holder
	// rare holds what few jobs have (nil: none of it).
	rare    *jobRare
	Attempt int32
	// TimeoutS bounds each attempt, in seconds (0: none; Item.Timeout):
	// the leader gives back a job held past it (Leader.ReleaseOverdue).
	TimeoutS int32
	// Retries and MaxRetries: at most fairway.MaxRetriesLimit (100).
	Retries, MaxRetries uint8
	// Progress is its attempt's, 0 to 100.
	Progress int8
	state    jobStateCode
	priority priorityCode
	flags    jobFlags
}

// jobRare is what a Job holds of the fields that few jobs set.
type jobRare struct {
	// expiresAt: it fails if it has not run by then (0: never).
	expiresAt int64
	// waits are the dependencies it waits for (it is pending while any).
	waits []string
}

// jobStateCode is a State's state as its index in stateCodes (the snapshot's
// numbering too).
type jobStateCode uint8

// priorityCode is a job's priority: "", then those of fairway.Priority.
type priorityCode uint8

// priorityNames are the priorities a Job holds, by priorityCode. A
// submission's priority is checked before it is appended (high or low).
var priorityNames = []string{"", string(fairway.PriorityLow), string(fairway.PriorityHigh)}

// jobFlags are a Job's yes-or-no fields.
type jobFlags uint8

const (
	// flagCancelRequested: cancelled while scheduled or running; it ends
	// when its executor says so.
	flagCancelRequested jobFlags = 1 << iota
	// flagTriggered: pending, it releases itself at RunAt (Item.Trigger).
	flagTriggered
)

// posIndexBits is how many bits of a job's pos its index in its row
// takes: a row holds fewer than a million items.
const posIndexBits = 20

// NewJob is a job of task in state, submitted by item index of row: what
// the fold makes of a Submitted item before the rest of its fields.
func NewJob(task string, state fairway.State, row int64, index int32) *Job {
	j := &Job{Task: task}
	j.setState(state)
	j.setPlace(row, index)
	return j
}

// State is the job's state: pending, waiting, scheduled, running or
// stuck (a job that ends leaves the State).
func (j *Job) State() fairway.State { return stateCodes[j.state] }

// setState sets the job's state, one of those State returns.
func (j *Job) setState(st fairway.State) {
	for c, s := range stateCodes {
		if s == st {
			j.state = jobStateCode(c) //nolint:gosec // G115: a handful of states
			return
		}
	}
	panic("journal: a job in the state is never " + string(st))
}

// Priority is the job's priority ("" for none given).
func (j *Job) Priority() string { return priorityNames[j.priority] }

// setPriority sets the job's priority; one the API does not accept (it
// checks them before they are appended) counts as low.
func (j *Job) setPriority(p string) {
	switch p {
	case "":
		j.priority = 0
	case string(fairway.PriorityHigh):
		j.priority = 2
	default:
		j.priority = 1
	}
}

// Row and Index locate the Submitted item that carries the job's
// arguments.
func (j *Job) Row() int64 { return j.pos >> posIndexBits }

// Index: see Row.
func (j *Job) Index() int32 { return int32(j.pos & (1<<posIndexBits - 1)) } //nolint:gosec // G115: 20 bits

// setPlace sets Row and Index.
func (j *Job) setPlace(row int64, index int32) { j.pos = row<<posIndexBits | int64(index) }

// age orders a group's jobs, oldest first: journal order.
func (j *Job) age() int64 { return j.pos }

// ExpiresAt: it fails if it has not run by then (Unix µs; 0: never).
func (j *Job) ExpiresAt() int64 {
	if j.rare == nil {
		return 0
	}
	return j.rare.expiresAt
}

// setExpiresAt sets ExpiresAt.
func (j *Job) setExpiresAt(at int64) {
	if at == 0 && j.rare == nil {
		return
	}
	j.ensureRare().expiresAt = at
	j.dropRare()
}

// Waits are the dependencies it waits for (it is pending while any); the
// fold edits them in place, so a reader copies them.
func (j *Job) Waits() []string {
	if j.rare == nil {
		return nil
	}
	return j.rare.waits
}

// setWaits sets Waits (nil for none).
func (j *Job) setWaits(ids []string) {
	if len(ids) == 0 {
		ids = nil
	}
	if ids == nil && j.rare == nil {
		return
	}
	j.ensureRare().waits = ids
	j.dropRare()
}

func (j *Job) ensureRare() *jobRare {
	if j.rare == nil {
		j.rare = &jobRare{}
	}
	return j.rare
}

// dropRare lets go of rare when it holds nothing.
func (j *Job) dropRare() {
	if j.rare != nil && j.rare.expiresAt == 0 && j.rare.waits == nil {
		j.rare = nil
	}
}

// CancelRequested: cancelled while scheduled or running; it ends when
// its executor says so.
func (j *Job) CancelRequested() bool { return j.flags&flagCancelRequested != 0 }

// Triggered: pending, it releases itself at RunAt (Item.Trigger).
func (j *Job) Triggered() bool { return j.flags&flagTriggered != 0 }

// setCancelRequested sets CancelRequested.
func (j *Job) setCancelRequested(on bool) { j.setFlag(flagCancelRequested, on) }

// setTriggered sets Triggered.
func (j *Job) setTriggered(on bool) { j.setFlag(flagTriggered, on) }

func (j *Job) setFlag(f jobFlags, on bool) {
	if on {
		j.flags |= f
	} else {
		j.flags &^= f
	}
}

// retryCount is n as a Job holds a count of retries: at most 255 (the
// API allows 100).
func retryCount(n int32) uint8 { return uint8(min(max(n, 0), 255)) } //nolint:gosec // G115: clamped

// progressOf is n as a Job holds an attempt's progress: 0 to 100.
func progressOf[T int16 | int32](n T) int8 { return int8(min(max(n, 0), 100)) } //nolint:gosec // G115: clamped

// Copy is a copy of the job that shares nothing the fold edits (its
// holder, its dependencies).
func (j *Job) Copy() Job {
	c := *j
	if j.Holder != nil {
		h := *j.Holder
		c.Holder = &h
	}
	if j.rare != nil {
		r := *j.rare
		r.waits = slices.Clone(r.waits)
		c.rare = &r
	}
	return c
}
