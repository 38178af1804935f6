package store

import (
	_ "embed"
	"time"

	"github.com/fairwayhq/fairway"
)

// ClaimParams says who claims how many jobs.
type ClaimParams struct {
	// Executor is the executor's app-id.
	Executor string
	// Instance, when set, is the executor instance that asks: unless it is
	// the instance registered for Executor now, and live, the claim fails with
	// fairway.ErrNotRegistered and changes nothing. The claimed attempts
	// are recorded as held by this instance: only its reports apply.
	Instance string
	// ClaimID, when set, is the id of the dispatch request. A claim under
	// an id that already claimed jobs still scheduled returns those, with a
	// fresh lease, and claims nothing new: the executor sent the request
	// again because the answer was lost (or the first request was served
	// late, after the executor had sent it again and been answered).
	ClaimID string
	// Reclaimed, when set, is called with the number of jobs handed out
	// again under ClaimID.
	Reclaimed func(jobs int)
	// Limit is the number of free slots: at most this many jobs are claimed.
	Limit int
	// Tasks are the tasks the executor can run; only those are claimed.
	Tasks []string
	// Groups, when not nil, are the only groups whose jobs are claimed
	// (what the executor's credential grants); empty claims nothing.
	Groups []string
	// Fairness is what a group's turn is worth: FairnessJobs (the
	// default) or FairnessTime (see internal/fairness, shares.go).
	Fairness string
	// MaxHeld, when positive, caps the jobs Instance holds (scheduled or
	// running) after the claim, whatever Limit says: an executor cannot
	// gather jobs by asking again and again.
	MaxHeld int
	// Lease is how long the claim holds without a heartbeat.
	Lease time.Duration
	// Scheme is the counting scheme.
	Scheme fairway.CountingScheme
	// TaskLimits caps, per task, the jobs of it this claim may take: the
	// executor's free slots for the tasks it runs with a max-concurrent.
	// A task absent is bounded by Limit only.
	TaskLimits map[string]int
}
