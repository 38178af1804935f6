package fairway

// Outcome is how an attempt ended, as an executor reports it (all but
// OutcomeLost) or a coordinator decides it (OutcomeLost).
type Outcome string

const (
	OutcomeSuccess   Outcome = "success"   // the handler returned nil
	OutcomeError     Outcome = "error"     // the handler failed: retry if retries remain
	OutcomePermanent Outcome = "permanent" // the handler failed permanently: no retry
	OutcomeCancelled Outcome = "cancelled" // the job was cancelled while running
	OutcomeReleased  Outcome = "released"  // the executor gave the job back unfinished (shutdown): back to waiting, not a failure
	OutcomeSnoozed   Outcome = "snoozed"   // the handler asked to run again later (Snooze): back to waiting, due then, not a failure
	// OutcomeLost: the executor died (its lease expired) or restarted. The
	// attempt counts as failed; the job is due again at once. Only
	// coordinators decide it.
	OutcomeLost Outcome = "lost"
)

// Reportable says whether an executor may report o.
func (o Outcome) Reportable() bool {
	switch o {
	case OutcomeSuccess, OutcomeError, OutcomePermanent, OutcomeCancelled, OutcomeReleased, OutcomeSnoozed:
		return true
	}
	return false
}
