package journal_test

import (
	"slices"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// transitions is every state change a job may make: from the state before
// (no state: the first event of a submission) to the states after. Each is
// one event. The fold makes these and no others: the random histories of
// TestTheLeadersStateIsTheFoldOfPostgreSQL check every change it makes
// against this table (history.catchUp).
var transitions = map[fairway.State][]fairway.State{
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

// allowed says whether a job may go from one state to another (from "":
// its first event).
func allowed(from, to fairway.State) bool {
	return slices.Contains(transitions[from], to)
}

// TestTransitionsAreClosed: every state a transition reaches is a job
// state with its own entry (or final, or an event-only state), and a final
// state is left only by a retry by hand (failed or cancelled → waiting,
// or pending for a job with dependencies).
func TestTransitionsAreClosed(t *testing.T) {
	for from, tos := range transitions {
		if from.Final() {
			require.NotEqual(t, fairway.StateSuccess, from, "a success is never retried")
			require.Equal(t, []fairway.State{fairway.StateWaiting, fairway.StatePending}, tos, "%s is final: only a retry by hand leaves it", from)
			continue
		}
		for _, to := range tos {
			_, has := transitions[to]
			require.True(t, has || to.Final() || to.EventOnly(), "%s → %s: %s has no transitions of its own", from, to, to)
		}
	}
	for _, st := range fairway.States {
		_, has := transitions[st]
		require.True(t, has || st.Final(), "state %s is missing from transitions", st)
	}
	require.False(t, allowed(fairway.StateSuccess, fairway.StateWaiting))
}
