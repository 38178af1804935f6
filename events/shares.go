package events

import (
	"context"

	"github.com/fairwayhq/fairway"
)

// Fair shares and rate limits (operators): see docs/architecture.md, "Fair
// shares".
const (
	VerbGroups     = "groups"      // admin only; body: GroupsRequest; each group's share of slot-time
	VerbWeightSet  = "weight-set"  // admin only; body: WeightRequest
	VerbRateSet    = "rate-set"    // admin only; body: RateRequest
	VerbRateDelete = "rate-delete" // admin only; body: RateRequest (scope only)
)

// GroupsRequest is the body of groups: the window to measure the shares
// over (a Go duration, "1h" by default, at most 24h).
type GroupsRequest struct {
	Window string `json:"window,omitempty"`
}

// WeightRequest is the body of weight-set: a group's weight (above 0, at
// most 1000; 1 is the default).
type WeightRequest struct {
	Group  string  `json:"group"`
	Weight float64 `json:"weight"`
}

// RateRequest is the body of rate-set (scope and rate) and rate-delete
// (scope): a rate limit of "task:T", "group:G" ("group:*": each group) or
// both ("task:send-mail,group:*"), at most rate job starts ("10/s",
// "100/m").
type RateRequest struct {
	Scope string `json:"scope"`
	Rate  string `json:"rate,omitempty"`
}

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
