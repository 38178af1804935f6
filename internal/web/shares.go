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

// sharesKey names a cached answer: a server's, for a window. A weight set
// clears them all (sharesCache.gen).
type sharesKey struct {
	s      *Server
	window time.Duration
}

type sharesEntry struct {
	at     time.Time
	groups []fairway.GroupShare
}

// sharesCache holds the shares answers of every server of the process
// (one, but in tests), at most statsCacheMax; a computation runs once at a
// time per server, window and lane.
var sharesCache = struct {
	mu      sync.Mutex
	entries map[sharesKey]sharesEntry
	gen     uint64 // raised by every weight set: an answer computed before is not kept
	flight  flight.Group[sharesFlight, []fairway.GroupShare]
}{entries: map[sharesKey]sharesEntry{}}

type sharesFlight struct {
	key  sharesKey
	lane string
	gen  uint64
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
	key := sharesKey{s: s, window: window}
	groups, ok := cachedShares(key)
	if !ok {
		sharesCache.mu.Lock()
		gen := sharesCache.gen
		sharesCache.mu.Unlock()
		ctx, cancel := s.ctx(r)
		defer cancel()
		groups, _, err = sharesCache.flight.Do(ctx, sharesFlight{key: key, lane: laneOf(c.role), gen: gen}, func() ([]fairway.GroupShare, error) {
			// Not the context of the request that started it: its
			// client may leave, the others still wait for the answer.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
			defer cancel()
			groups, err := s.cfg.Client.Groups(ctx, durations([]time.Duration{window}))
			if err != nil {
				return nil, err
			}
			sharesCache.mu.Lock()
			defer sharesCache.mu.Unlock()
			if sharesCache.gen == gen {
				if len(sharesCache.entries) >= statsCacheMax {
					clear(sharesCache.entries)
				}
				sharesCache.entries[key] = sharesEntry{at: time.Now(), groups: groups}
			}
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

// cachedShares is the cached answer of key, if it is fresh.
func cachedShares(key sharesKey) ([]fairway.GroupShare, bool) {
	sharesCache.mu.Lock()
	defer sharesCache.mu.Unlock()
	e, ok := sharesCache.entries[key]
	if !ok || time.Since(e.at) >= sharesTTL {
		return nil, false
	}
	return e.groups, true
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
	sharesCache.mu.Lock()
	sharesCache.gen++
	clear(sharesCache.entries)
	sharesCache.mu.Unlock()
	s.log.Info("group weight set from the dashboard", "group", group, "weight", *body.Weight)
	if groups == nil {
		groups = []fairway.GroupShare{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"window": "1h", "groups": groups})
	return nil
}
