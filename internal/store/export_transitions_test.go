package store

import (
	"slices"

	"github.com/fairwayhq/fairway"
)

// Transitions is every state change a job may make: from the state before
// (no state: the first event of a submission) to the states after. Each is
// one event. The store's statements (SQL in sql/ and the few inline ones)
// make these and no others: TestEveryEventIsAnAllowedTransition drives
// each of them and checks every event it wrote against this table.
var Transitions = map[fairway.State][]fairway.State{
	// A submission: stored held or eligible, or refused (an event, no job);
	// a periodic task's due time: fired (its new job), or skipped (the
	// event names the previous job, which has not ended).
	"": {fairway.StatePending, fairway.StateWaiting, fairway.StateRejected, fairway.StateFired, fairway.StateSkipped},
	// Released (by hand, trigger_after, or its dependencies' success),
	// cancelled (also: a dependency failed), or expired.
	fairway.StatePending: {fairway.StateWaiting, fairway.StateCancelled, fairway.StateFailed},
	// Claimed, cancelled, or expired.
	fairway.StateWaiting: {fairway.StateScheduled, fairway.StateCancelled, fairway.StateFailed},
	// Started; or ended before a start was reported: an outcome (success,
	// error → stuck, permanent or last retry → failed, cancelled, released →
	// waiting) or lost (lease expired, executor restarted → stuck or failed).
	fairway.StateScheduled: {fairway.StateRunning, fairway.StateSuccess, fairway.StateStuck, fairway.StateFailed, fairway.StateCancelled, fairway.StateWaiting},
	// An outcome, or lost.
	fairway.StateRunning: {fairway.StateSuccess, fairway.StateStuck, fairway.StateFailed, fairway.StateCancelled, fairway.StateWaiting},
	// Claimed again once due, cancelled, or expired.
	fairway.StateStuck: {fairway.StateScheduled, fairway.StateCancelled, fairway.StateFailed},
	// Retried by hand (pending: a job with dependencies waits for them
	// again).
	fairway.StateFailed:    {fairway.StateWaiting, fairway.StatePending},
	fairway.StateCancelled: {fairway.StateWaiting, fairway.StatePending},
}

// Allowed says whether a job may go from one state to another (from "":
// its first event).
func Allowed(from, to fairway.State) bool {
	return slices.Contains(Transitions[from], to)
}
