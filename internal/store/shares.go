package store

import "github.com/fairwayhq/fairway/internal/fairness"

// Fair shares (scheduler.fairness, and group weights): the rules are in
// internal/fairness, and the journal's leader applies them in its claims.

// The fairness modes (scheduler.fairness).
const (
	// FairnessJobs: each turn is one job (the seeds' rule).
	FairnessJobs = fairness.ByJobs
	// FairnessTime: each group gets its weighted share of slot-time.
	FairnessTime = fairness.ByTime
)
