package journal

import (
	"encoding/json"
	"fmt"

	"github.com/fairwayhq/fairway"
)

// Kind names what a row's batch records. Each kind's items use the Item
// fields its constant names; the others are empty.
type Kind string

// The kinds of rows. Any coordinator appends submissions and executors'
// reports (epoch 0); the partition's leader appends the rest, fenced by
// its epoch (AppendFenced).
const (
	// Submitted: new jobs (Task, Priority, RunAt, MaxRetries, Pending,
	// Waits, ExpiresAt, Args and the submission's other fields). An item
	// whose job is live already is a duplicate and changes nothing.
	Submitted Kind = "submitted"
	// Claimed: jobs handed to an executor (Attempt, the attempt they now
	// run; Executor, Instance; Charge, with fair shares). Applies to a waiting or stuck job of a
	// group that is not paused whose attempt is Attempt-1. A job's attempt
	// counts its claims and goes back only when a stopping instance gives
	// it back (a Released item's GiveBack; another release or a snooze
	// counts no retry but keeps it): with the executor's instance it is
	// what a report names, so that a report of an earlier claim never
	// applies to a later one. Retries count the failed attempts.
	Claimed Kind = "claimed"
	// Started: the executor began the attempt (Attempt; RunAt, when its
	// handler started as the executor reported it, which the fold keeps
	// between the claimed row's time and this row's: 0, this row's).
	Started Kind = "started"
	// Progress: the attempt's progress (Attempt, Progress).
	Progress Kind = "progress"
	// Ended: the attempt's end (Attempt, Outcome; RunAt for a retry or a
	// snooze; Result, Error; RanMS, when fair shares count time).
	Ended Kind = "ended"
	// Released: the attempt handed back without running to its end
	// (Attempt; Error; RanMS, as Ended): the job waits again, no retry counted, and with
	// GiveBack its attempt goes back to the one before; or, Counted,
	// the attempt was lost with its executor and counts as one that
	// failed (retried now, at RunAt, unless out of retries).
	Released Kind = "released"
	// Cancel: cancel the jobs; a job that is scheduled or running is
	// marked, and ends when its executor reports it (Ended, OutcomeCancelled).
	Cancel Kind = "cancel"
	// Resolved: dependencies of pending jobs resolved from their records
	// (Waits: those that succeeded; Error: one failed or was cancelled,
	// and the job is cancelled with it).
	Resolved Kind = "resolved"
	// Release: release pending jobs that wait for no dependency.
	Release Kind = "release"
	// Expired: jobs whose expiry passed before they ran fail.
	Expired Kind = "expired"
	// Retried: finished jobs retried by hand (as Submitted, and Attempt:
	// the attempts they ran, which go on counting).
	Retried Kind = "retried"
	// Priority: the jobs' priority changed (Priority).
	Priority Kind = "priority"
	// Paused and Resumed: a group's claims stop and resume (Group only).
	Paused  Kind = "paused"
	Resumed Kind = "resumed"
	// Weight: a group's weight in the fair shares (Group, Weight).
	Weight Kind = "weight"
	// Rate: a rate limit of Task ("" any) in Group ("" the cluster, "*"
	// each group) set to Starts per PeriodMS, or removed (Starts 0).
	Rate Kind = "rate"
)

// The outcomes of an Ended item.
const (
	OutcomeSuccess   = "success"
	OutcomeError     = "error"     // retried at RunAt unless Permanent or out of retries
	OutcomeSnooze    = "snooze"    // waits again until RunAt; no retry counted
	OutcomeCancelled = "cancelled" // the executor stopped it after a cancel
)

// Item is one job's part of a batch. Times are microseconds since the
// Unix epoch (PostgreSQL's precision), so that a fold and its snapshot
// compare exactly.
type Item struct {
	Group   string `json:"g"`
	ID      string `json:"id,omitempty"`
	Attempt int32  `json:"a,omitempty"`

	// Submitted.
	Task       string `json:"task,omitempty"`
	Priority   string `json:"pri,omitempty"`
	RunAt      int64  `json:"run_at,omitempty"`
	MaxRetries int32  `json:"max_retries,omitempty"`
	Pending    bool   `json:"pending,omitempty"`
	// Trigger: a pending job that releases itself at RunAt (a
	// submission's trigger_after), and is due at once when released.
	Trigger     bool            `json:"trigger,omitempty"`
	Waits       []string        `json:"waits,omitempty"` // dependencies that had not succeeded when it was stored
	ExpiresAt   int64           `json:"expires_at,omitempty"`
	Timeout     string          `json:"timeout,omitempty"`
	Tracker     string          `json:"tracker,omitempty"`
	Subject     string          `json:"subject,omitempty"`
	Submitter   string          `json:"submitter,omitempty"`
	TraceParent string          `json:"traceparent,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"`
	// Submitted (µs), on a Retried item: when the job was first
	// submitted, which a retry by hand keeps (0: its row's time).
	Submitted int64 `json:"submitted,omitempty"`

	// Claimed.
	Executor string `json:"executor,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Claim is the dispatch request's id (ClaimParams.ClaimID): a request
	// sent again under it gets the jobs it claimed.
	Claim string `json:"claim,omitempty"`
	// Charge is how far the claim moved the job's group's virtual time in
	// the fair shares (its cost over the group's weight; 0: the claim
	// used no shares).
	Charge float64 `json:"charge,omitempty"`

	// Progress.
	Progress int16 `json:"progress,omitempty"`

	// Ended and Released.
	Outcome   string          `json:"outcome,omitempty"`
	Permanent bool            `json:"permanent,omitempty"`
	Counted   bool            `json:"counted,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	// RanMS is how long the ended (or released) attempt ran, in milliseconds, as its
	// executor reported it: learned by the fair shares of time (0: not
	// learned).
	RanMS float64 `json:"ran_ms,omitempty"`
	// GiveBack, on a Released item that is not Counted: the attempt is
	// given back, the job's attempt goes back to the one before it. Set
	// when the releasing instance stops (its executor told the leader
	// before releasing, events.DispatchRequest.Stopping): an instance
	// never claims again once it stops, so no report of the attempt
	// given back can match the next claim, which reuses its number (a
	// report names the instance).
	GiveBack bool `json:"give_back,omitempty"`
	// EndedAt (µs), on an Ended item: when the attempt ended, as its
	// executor reported it (0: not said). A final state's record keeps it
	// as the job's finished time, within the attempt's start and the
	// record's write: a skewed executor cannot move it far.
	EndedAt int64 `json:"ended_at,omitempty"`

	// Weight.
	Weight float64 `json:"weight,omitempty"`

	// Rate (and Task, Group).
	Starts   float64 `json:"starts,omitempty"`
	PeriodMS int64   `json:"period_ms,omitempty"`
}

// The first byte of a body says its format: JSON (what EncodeJSON writes,
// as SQL can) or binary (what Encode writes, batch.go).
const (
	jsonBatch   = 1
	binaryBatch = 2
)

// Decode reads a row's body, in either format. A binary body's Args and
// Result are slices of body, not copies.
func Decode(body []byte) ([]Item, error) {
	switch {
	case len(body) > 0 && body[0] == binaryBatch:
		return decodeBinary(body[1:])
	case len(body) > 0 && body[0] == jsonBatch:
		var items []Item
		if err := json.Unmarshal(body[1:], &items); err != nil {
			return nil, fmt.Errorf("decoding a journal batch: %w", err)
		}
		return items, nil
	}
	return nil, fmt.Errorf("a journal body of an unknown format (first byte %v; this build reads %d and %d)", body[:min(1, len(body))], jsonBatch, binaryBatch)
}

// decodeSome decodes the items at the indexes want of a row's body (one
// past its items is left out).
func decodeSome(body []byte, want []int32) (map[int32]Item, error) {
	if len(body) > 0 && body[0] == binaryBatch {
		return decodeBinarySome(body[1:], want)
	}
	items, err := Decode(body)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]Item, len(want))
	for _, i := range want {
		if int(i) < len(items) {
			out[i] = items[i]
		}
	}
	return out, nil
}

// EncodeJSON makes a row's body of a batch in JSON, as SQL writes it.
func EncodeJSON(items []Item) ([]byte, error) {
	if err := checkRowItems(len(items)); err != nil {
		return nil, err
	}
	b, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("encoding a journal batch of %d items: %w", len(items), err)
	}
	return append([]byte{jsonBatch}, b...), nil
}

// ItemOf is a normalized submission as a submitted row's item.
func ItemOf(s fairway.Submission) Item {
	it := Item{
		Group: s.Group, ID: s.ID, Task: s.Task, Priority: string(s.Priority), Pending: s.Pending || s.TriggerAfter != nil,
		Timeout: s.Timeout, Tracker: s.Tracker, Subject: s.Subject, Submitter: s.Submitter, TraceParent: s.TraceParent, Args: s.Args,
	}
	if s.MaxRetries != nil {
		it.MaxRetries = int32(*s.MaxRetries) //nolint:gosec // G115: Normalize keeps it within MaxRetriesLimit
	}
	if s.RunAt != nil {
		it.RunAt = s.RunAt.UnixMicro()
	}
	if s.TriggerAfter != nil {
		// Released then, and due at once: its due time is its release.
		it.Trigger, it.RunAt = true, s.TriggerAfter.UnixMicro()
	}
	if s.ExpiresAt != nil {
		it.ExpiresAt = s.ExpiresAt.UnixMicro()
	}
	it.Waits = s.DependsOn
	return it
}
