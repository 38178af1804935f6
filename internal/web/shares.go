package web

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/flight"
)

// The groups' shares of the executors' slot-time (GET /api/shares) and
// their weights (PUT /api/weights/{group}): see docs/architecture.md, "Fair
// shares of time, weights and rate limits".

// sharesWindows are the windows GET /api/shares takes: the stats windows
// the coordinators measure shares over (a day at most).
var sharesWindows = []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
	3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// sharesTTL is how long a shares answer is served from the cache: the
// fairness view of every open dashboard redraws while events arrive, and
// the shares read every job that ended in the window.
const sharesTTL = 3 * time.Second

type sharesEntry struct {
	at     time.Time
	groups []fairway.GroupShare
}

// sharesCache holds a server's shares answers by window; a computation
// runs once at a time per window and lane.
type sharesCache struct {
	mu      sync.Mutex
	entries map[time.Duration]sharesEntry
	gen     uint64 // raised by every weight set: an answer computed before is not kept
	flight  flight.Group[sharesFlight, []fairway.GroupShare]
}

type sharesFlight struct {
	window time.Duration
	lane   string
	gen    uint64
}

// cached is the cached answer for window, if it is fresh.
func (c *sharesCache) cached(window time.Duration) ([]fairway.GroupShare, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[window]
	if !ok || time.Since(e.at) >= sharesTTL {
		return nil, false
	}
	return e.groups, true
}

// keep caches groups for window unless a weight was set since gen.
func (c *sharesCache) keep(window time.Duration, gen uint64, groups []fairway.GroupShare) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.entries == nil {
		c.entries = map[time.Duration]sharesEntry{}
	}
	c.entries[window] = sharesEntry{at: time.Now(), groups: groups}
}

// generation is the weight sets counted so far.
func (c *sharesCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// forget drops every answer: a weight was set.
func (c *sharesCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}

// sharesWindow reads GET /api/shares' window: one of sharesWindows, 1h
// when absent.
func sharesWindow(text string) (time.Duration, error) {
	if text == "" {
		return time.Hour, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || !slices.Contains(sharesWindows, d) {
		return 0, fairway.Invalid("window", "%q is not one of the windows allowed: %s", text, durations(sharesWindows))
	}
	return d, nil
}

// shares answers each group's share of the executors' slot-time over the
// window against its weighted fair share (operators; verb groups): the
// groups that ran jobs in it, and those with a weight of their own.
func (s *Server) shares(w http.ResponseWriter, r *http.Request, c caller) error {
	window, err := sharesWindow(r.URL.Query().Get("window"))
	if err != nil {
		return err
	}
	groups, ok := s.sharesAnswers.cached(window)
	if !ok {
		gen := s.sharesAnswers.generation()
		ctx, cancel := s.ctx(r)
		defer cancel()
		groups, _, err = s.sharesAnswers.flight.Do(ctx, sharesFlight{window: window, lane: laneOf(c.role), gen: gen}, func() ([]fairway.GroupShare, error) {
			// Not the context of the request that started it: its
			// client may leave, the others still wait for the answer.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
			defer cancel()
			groups, err := s.cfg.Client.Groups(ctx, durations([]time.Duration{window}))
			if err != nil {
				return nil, err
			}
			s.sharesAnswers.keep(window, gen, groups)
			return groups, nil
		})
		if err != nil {
			return err
		}
	}
	if groups == nil {
		groups = []fairway.GroupShare{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"window": durations([]time.Duration{window}), "groups": groups})
	return nil
}

// setWeight sets a group's weight (body {"weight": 3}; verb weight-set)
// and answers the groups' shares over the last hour. The coordinators
// check the group and the weight.
func (s *Server) setWeight(w http.ResponseWriter, r *http.Request, _ caller) error {
	var body struct {
		Weight *float64 `json:"weight"`
	}
	if err := readBody(r, &body); err != nil {
		return err
	}
	if body.Weight == nil {
		return fairway.Invalid("weight", "missing: the group's weight, above 0 and at most 1000 (1 is the default)")
	}
	group := r.PathValue("group")
	ctx, cancel := s.ctx(r)
	defer cancel()
	groups, err := s.cfg.Client.SetWeight(ctx, group, *body.Weight)
	if err != nil {
		return err
	}
	s.sharesAnswers.forget()
	s.log.Info("group weight set from the dashboard", "group", group, "weight", *body.Weight)
	if groups == nil {
		groups = []fairway.GroupShare{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"window": "1h", "groups": groups})
	return nil
}
