package coordinator

import (
	"context"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// apiLimits answers limits, limit-set and limit-delete (operators): the
// concurrency limits, kept in PostgreSQL, so that every coordinator's
// claims enforce the same ones from their next claim on.
func (c *Coordinator) apiLimits(ctx context.Context, r request) (events.Reply, error) {
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
		c.log.Info("concurrency limit removed", "kind", req.Kind, "name", req.Name)
		c.dispatcher.notifyWork()
	default:
		if req != (events.LimitRequest{}) {
			return events.Reply{}, fairway.Invalid("body", "limits takes no body: use limit-set or limit-delete to change one")
		}
	}
	limits, err := c.store.Limits(ctx)
	return events.Reply{Limits: limits}, err
}
