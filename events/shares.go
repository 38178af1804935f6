package events

import (
	"context"

	"github.com/fairwayhq/fairway"
)

// Groups returns each group's share of the executors' slot-time over the
// last window ("": an hour), against its weighted fair share (operators).
func (c *Client) Groups(ctx context.Context, window string) ([]fairway.GroupShare, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbGroups), GroupsRequest{Window: window})
	if err != nil {
		return nil, err
	}
	return reply.Groups, nil
}

// SetWeight sets a group's weight (operators) and returns the groups'
// shares over the last hour.
func (c *Client) SetWeight(ctx context.Context, group string, weight float64) ([]fairway.GroupShare, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbWeightSet), WeightRequest{Group: group, Weight: weight})
	if err != nil {
		return nil, err
	}
	return reply.Groups, nil
}

// RateLimits returns the rate limits (operators).
func (c *Client) RateLimits(ctx context.Context) ([]fairway.RateLimit, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbLimits), struct{}{})
	if err != nil {
		return nil, err
	}
	return reply.Rates, nil
}

// SetRateLimit sets a rate limit (operators) and returns the rate limits.
func (c *Client) SetRateLimit(ctx context.Context, scope, rate string) ([]fairway.RateLimit, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbRateSet), RateRequest{Scope: scope, Rate: rate})
	if err != nil {
		return nil, err
	}
	return reply.Rates, nil
}

// DeleteRateLimit removes a rate limit (operators) and returns the rate
// limits left.
func (c *Client) DeleteRateLimit(ctx context.Context, scope string) ([]fairway.RateLimit, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbRateDelete), RateRequest{Scope: scope})
	if err != nil {
		return nil, err
	}
	return reply.Rates, nil
}

// Partitions returns the journal's partitions (operators): each one's
// leader and lease, database, unfinished jobs and how far its events
// trail.
func (c *Client) Partitions(ctx context.Context) ([]fairway.Partition, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbPartitions), struct{}{})
	if err != nil {
		return nil, err
	}
	return reply.Partitions, nil
}
