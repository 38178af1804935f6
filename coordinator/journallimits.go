package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/fairness"
	istore "github.com/fairwayhq/fairway/internal/store"
)

// Limits, rates and weights on the journal engine (docs/journal.md, "The
// coordinator on the journal"). The concurrency limits stay the
// operators' table (fairway_limit), which the leader's claims read through
// a cache: the held jobs they bound are counted by the partition's state.
// The rate limits and the weights are the state's (rate and weight rows:
// the fold moves their buckets and the shares' book), and the tables the
// replies list (fairway_rate_limit, fairway_group_share) are written
// after the row. A follower forwards the verbs that change them to the
// leader (leaderVerbs), so that the leader's cache and state change before
// the reply.

// limitsTTL is how long the leader's claims trust the concurrency limits
// they read: a change through the API is seen at the next claim (the
// leader reads them again), one made by SQL within limitsTTL.
const limitsTTL = time.Second

// limitsCache holds the concurrency limits the leader's claims read (the
// held counts store.Limits reads with them are fairway_job's, none on the
// journal: the claims count the state's). They live in the cluster's home
// database: while it cannot be reached, the claims of every partition go
// on with the limits last read (none can change meanwhile: a change is
// written there), tried again every homeRetry.
type limitsCache struct {
	read func(context.Context) ([]fairway.Limit, error)

	mu     sync.Mutex
	limits []fairway.Limit
	read1  bool      // the limits were read once
	at     time.Time // zero: read them again
	// failed is when a read last found the home unreachable.
	failed time.Time
}

// homeRetry is how often what is read from the home database (the
// limits, an instance's registration) is read again while the home
// cannot be reached and what was last read serves meanwhile.
const homeRetry = time.Second

// get returns the limits, read again when older than limitsTTL; the ones
// last read while the home database cannot be reached.
func (c *limitsCache) get(ctx context.Context) ([]fairway.Limit, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < limitsTTL || c.read1 && time.Since(c.failed) < homeRetry {
		return c.limits, nil
	}
	limits, err := c.read(ctx)
	if err != nil {
		if c.read1 && istore.Unreachable(err) {
			c.failed = time.Now()
			return c.limits, nil
		}
		return nil, err
	}
	c.limits, c.at, c.read1, c.failed = limits, time.Now(), true, time.Time{}
	return limits, nil
}

// forget makes the next get read the limits again.
func (c *limitsCache) forget() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// limitsReply is the concurrency and rate limits, with their held counts, the partition's
// state's as of the request (fairway_job holds no held job): a task's
// jobs held, a group's, and for "*" the most any one group holds.
func (c *Coordinator) limitsReply(ctx context.Context) (events.Reply, error) {
	limits, err := c.store.Limits(ctx)
	if err != nil {
		return events.Reply{}, err
	}
	tasks, groups, err := c.parts.heldCounts(ctx)
	if err != nil {
		return events.Reply{}, journalError(err)
	}
	for i, l := range limits {
		switch {
		case l.Kind == "task":
			limits[i].Held = tasks[l.Name]
		case l.Name == "*":
			most := 0
			for _, n := range groups {
				most = max(most, n)
			}
			limits[i].Held = most
		default:
			limits[i].Held = groups[l.Name]
		}
	}
	rates, err := c.store.RateLimits(ctx)
	return events.Reply{Limits: limits, Rates: rates}, err
}

// journalSetRate sets (starts > 0) or removes (starts 0) a rate limit on
// the journal: the leader's rate row, which its claims count from (the
// caller then writes the table the replies list; sent again after a
// failure, either step is the same again).
func (c *Coordinator) journalSetRate(ctx context.Context, task, group string, starts int, period time.Duration) error {
	// A group's rate on its partition; a task's on every partition, each
	// counting its own starts, and the dispatch counts it over the
	// partitions (clusterLimits).
	parts := c.parts
	if group != "" {
		parts = partitions{c.parts.of(group)}
	}
	for _, e := range parts {
		if err := e.leader.SetRateLimit(ctx, fairness.RateLimit{Task: task, Group: group, Starts: float64(starts), Period: period}); err != nil {
			return journalError(err)
		}
	}
	return nil
}

// journalSetWeight sets a group's weight on the journal: the leader's
// weight row, then the table the groups verb lists.
func (c *Coordinator) journalSetWeight(ctx context.Context, group string, weight float64) error {
	if err := journalError(c.parts.of(group).leader.SetWeight(ctx, group, weight)); err != nil {
		return err
	}
	return c.store.SetWeight(ctx, group, weight)
}
