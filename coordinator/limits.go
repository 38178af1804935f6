package coordinator

import (
	"context"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// apiLimits answers limits, limit-set and limit-delete (operators): the
// concurrency limits, kept in PostgreSQL, so that every coordinator's
// claims enforce the same ones from their next claim on.
func (c *Coordinator) apiLimits(ctx context.Context, r request) (events.Reply, error) {
	if r.verb == events.VerbRateSet || r.verb == events.VerbRateDelete {
		return c.apiRates(ctx, r)
	}
	var req events.LimitRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	switch r.verb {
	case events.VerbLimitSet:
		if req.Max == nil {
			return events.Reply{}, fairway.Invalid("max", "missing: how many jobs may be held at once (0 stops new claims)")
		}
		if err := c.store.SetLimit(ctx, req.Kind, req.Name, *req.Max); err != nil {
			return events.Reply{}, err
		}
		c.parts.forgetLimits() // the claims read them again (this coordinator leads: leaderVerbs)
		c.log.Info("concurrency limit set", "kind", req.Kind, "name", req.Name, "max", *req.Max)
		// A raised limit frees slots now.
		c.dispatcher.notifyWork()
	case events.VerbLimitDelete:
		if req.Max != nil {
			return events.Reply{}, fairway.Invalid("max", "limit-delete takes kind and name only")
		}
		if err := c.store.DeleteLimit(ctx, req.Kind, req.Name); err != nil {
			return events.Reply{}, err
		}
		c.parts.forgetLimits() // the claims read them again (this coordinator leads: leaderVerbs)
		c.log.Info("concurrency limit removed", "kind", req.Kind, "name", req.Name)
		c.dispatcher.notifyWork()
	default:
		if req != (events.LimitRequest{}) {
			return events.Reply{}, fairway.Invalid("body", "limits takes no body: use limit-set or limit-delete to change one")
		}
	}
	return c.limitsReply(ctx)
}

// apiRates answers rate-set and rate-delete: rate limits, rows of the
// journal that its leader's claims count (and kept in fairway_rate_limit
// for the listing).
func (c *Coordinator) apiRates(ctx context.Context, r request) (events.Reply, error) {
	var req events.RateRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	task, group, err := fairway.ParseRateScope(req.Scope)
	if err != nil {
		return events.Reply{}, err
	}
	if r.verb == events.VerbRateDelete {
		if req.Rate != "" {
			return events.Reply{}, fairway.Invalid("rate", "rate-delete takes the scope only")
		}
		if err := c.journalSetRate(ctx, task, group, 0, 0); err != nil {
			return events.Reply{}, err
		}
		if err := c.store.DeleteRateLimit(ctx, task, group); err != nil {
			return events.Reply{}, err
		}
		c.log.Info("rate limit removed", "scope", req.Scope)
		c.dispatcher.notifyWork()
		return c.limitsReply(ctx)
	}
	starts, period, err := fairway.ParseRate(req.Rate)
	if err != nil {
		return events.Reply{}, err
	}
	if task == "" && group == "" {
		return events.Reply{}, fairway.Invalid("scope", "missing: name a task, a group, or both")
	}
	if err := c.journalSetRate(ctx, task, group, starts, period); err != nil {
		return events.Reply{}, err
	}
	if err := c.store.SetRateLimit(ctx, task, group, req.Rate); err != nil {
		return events.Reply{}, err
	}
	c.log.Info("rate limit set", "scope", req.Scope, "rate", req.Rate)
	c.dispatcher.notifyWork()
	return c.limitsReply(ctx)
}

// groupsWindowDefault and groupsWindowMax bound the window of groups.
const (
	groupsWindowDefault = time.Hour
	groupsWindowMax     = 24 * time.Hour
)

// apiGroups answers groups and weight-set: each group's share of the
// executors' slot-time over a window, against its weighted fair share;
// weight-set first sets a group's weight, a row of the journal that the
// leader's claims follow from the next claim on.
func (c *Coordinator) apiGroups(ctx context.Context, r request) (events.Reply, error) {
	window := groupsWindowDefault
	if r.verb == events.VerbWeightSet {
		var req events.WeightRequest
		if err := decode(r.data, &req); err != nil {
			return events.Reply{}, err
		}
		if err := c.journalSetWeight(ctx, req.Group, req.Weight); err != nil {
			return events.Reply{}, err
		}
		c.log.Info("group weight set", "group", req.Group, "weight", req.Weight)
	} else {
		var req events.GroupsRequest
		if err := decode(r.data, &req); err != nil {
			return events.Reply{}, err
		}
		if req.Window != "" {
			d, err := time.ParseDuration(req.Window)
			if err != nil || d < time.Second || d > groupsWindowMax {
				return events.Reply{}, fairway.Invalid("window", "%q is not a duration from 1s to %s (examples: 10m, 1h, 24h)", req.Window, groupsWindowMax)
			}
			window = d
		}
	}
	shares, err := c.groupShares(ctx, window)
	return events.Reply{Groups: shares}, err
}
