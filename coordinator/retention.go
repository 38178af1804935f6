package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
)

// Retention is how long finished jobs are kept, by final state, before the
// coordinator that leads the maintenance prunes them with their logs.
// Zero takes the default;
// negative keeps them for ever.
type Retention struct {
	Success, Failed, Cancelled time.Duration
	// Interval is how often the leading coordinator prunes. Defaults to a minute.
	Interval time.Duration
}

// Defaults of Retention: what River (1 day for completed jobs) and Oban
// (pruning by age) users expect; failures stay long enough to be looked at.
const (
	RetentionSuccessDefault  = 24 * time.Hour
	RetentionFailedDefault   = 30 * 24 * time.Hour
	RetentionIntervalDefault = time.Minute
	// pruneMaxBatch caps one prune request of the operator API.
	pruneMaxBatch = 10_000
)

func (r Retention) withDefaults() Retention {
	if r.Success == 0 {
		r.Success = RetentionSuccessDefault
	}
	if r.Failed == 0 {
		r.Failed = RetentionFailedDefault
	}
	if r.Cancelled == 0 {
		r.Cancelled = RetentionFailedDefault
	}
	if r.Interval <= 0 {
		r.Interval = RetentionIntervalDefault
	}
	return r
}

// ages is the retention of each final state; negative: kept for ever.
func (r Retention) ages() []struct {
	state fairway.State
	age   time.Duration
} {
	return []struct {
		state fairway.State
		age   time.Duration
	}{{fairway.StateSuccess, r.Success}, {fairway.StateFailed, r.Failed}, {fairway.StateCancelled, r.Cancelled}}
}

// apiPrune removes one batch of finished jobs (operators only): the
// client asks again while a whole batch was removed.
func (c *Coordinator) apiPrune(ctx context.Context, r request) (events.Reply, error) {
	var req events.PruneRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	if !req.State.Final() {
		return events.Reply{}, fairway.Invalid("state", "%q is not a final state: prune success, failed or cancelled jobs", req.State)
	}
	olderThan, err := time.ParseDuration(req.OlderThan)
	if err != nil || olderThan < 0 {
		return events.Reply{}, fairway.Invalid("older_than", "%q is not a duration such as 720h or 30m", req.OlderThan)
	}
	if req.Limit < 0 || req.Limit > pruneMaxBatch {
		return events.Reply{}, fairway.Invalid("limit", "%d: must be in 1..%d (0: %d)", req.Limit, pruneMaxBatch, store.PruneBatchDefault)
	}
	if req.Group != "" {
		if err := fairway.CheckName("group", req.Group); err != nil {
			return events.Reply{}, err
		}
	}
	stores := c.parts.stores()
	if req.Group != "" {
		stores = []*store.Store{c.parts.of(req.Group).store}
	}
	limit := req.Limit
	if limit == 0 {
		limit = store.PruneBatchDefault
	}
	n := 0
	for _, st := range stores {
		pruned, err := st.Prune(ctx, req.State, olderThan, req.Group, limit-n)
		n += pruned
		if err != nil {
			return events.Reply{Pruned: n}, err
		}
		if n >= limit {
			break
		}
	}
	if n > 0 {
		c.log.Info("pruned finished jobs on request", "state", req.State, "older_than", olderThan.String(), "group", req.Group, "jobs", n)
	}
	return events.Reply{Pruned: n}, nil
}

// validate checks a retention.
func (r Retention) validate() error {
	if r.Interval < time.Second {
		return fmt.Errorf("retention interval %s: must be at least 1s", r.Interval)
	}
	return nil
}
