package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/calendar"
)

// route is one endpoint of the HTTP API: who may call it and what answers.
type route struct {
	pattern string // net/http pattern: method and path
	need    role   // roleNone: anyone (login, session, the API document)
	// operator routes need the operator API: a server confined to one
	// tenant's group answers them with 403.
	operator bool
	handle   func(s *Server, w http.ResponseWriter, r *http.Request, c caller) error
}

// routes is the HTTP API; openapi.json documents each (a test holds them
// to each other).
var routes = []route{
	{pattern: "GET /api/openapi.json", handle: (*Server).apiDocument},
	{pattern: "POST /api/login", handle: (*Server).login},
	{pattern: "POST /api/logout", handle: (*Server).logout},
	{pattern: "GET /api/session", handle: (*Server).session},
	{pattern: "GET /api/jobs", need: roleRead, handle: (*Server).listJobs},
	{pattern: "GET /api/jobs/{group}/{id}", need: roleRead, handle: (*Server).getJob},
	{pattern: "GET /api/jobs/{group}/{id}/graph", need: roleRead, handle: (*Server).jobGraph},
	{pattern: "POST /api/jobs/{group}/{id}/{action}", need: roleAdmin, handle: (*Server).jobAction},
	{pattern: "POST /api/bulk", need: roleRead, handle: (*Server).bulk}, // a preview only reads; the handler checks the rest
	{pattern: "GET /api/stats", need: roleRead, handle: (*Server).stats},
	{pattern: "GET /api/groups", need: roleRead, handle: (*Server).groups},
	{pattern: "GET /api/executors", need: roleRead, operator: true, handle: (*Server).executors},
	{pattern: "GET /api/partitions", need: roleRead, operator: true, handle: (*Server).partitions},
	{pattern: "POST /api/executors/{app}/drain", need: roleAdmin, operator: true, handle: (*Server).drain},
	{pattern: "GET /api/limits", need: roleRead, operator: true, handle: (*Server).limits},
	{pattern: "PUT /api/limits/{kind}/{name}", need: roleAdmin, operator: true, handle: (*Server).limits},
	{pattern: "DELETE /api/limits/{kind}/{name}", need: roleAdmin, operator: true, handle: (*Server).limits},
	{pattern: "GET /api/shares", need: roleRead, operator: true, handle: (*Server).shares},
	{pattern: "PUT /api/weights/{group}", need: roleAdmin, operator: true, handle: (*Server).setWeight},
	{pattern: "GET /api/periodic", need: roleRead, operator: true, handle: (*Server).periodic},
	{pattern: "POST /api/periodic/{id}/{action}", need: roleAdmin, operator: true, handle: (*Server).periodicAction},
	{pattern: liveEventsRoute, need: roleRead, handle: (*Server).liveEvents},
}

// liveEventsRoute streams for as long as it is open: it takes a token of
// the read-only role's rate, not one of its places (streamBudget bounds the
// streams).
const liveEventsRoute = "GET /api/events"

// httpStatus maps Fairway's error codes to HTTP statuses: the one place.
var httpStatus = map[fairway.Code]int{
	fairway.CodeInvalid:     http.StatusBadRequest,
	fairway.CodeNotFound:    http.StatusNotFound,
	fairway.CodeConflict:    http.StatusConflict,
	fairway.CodeDuplicate:   http.StatusConflict,
	fairway.CodeQuota:       http.StatusTooManyRequests,
	fairway.CodeUnavailable: http.StatusServiceUnavailable,
	fairway.CodeInternal:    http.StatusInternalServerError,
	codeUnauthorized:        http.StatusUnauthorized,
	codeForbidden:           http.StatusForbidden,
}

// Codes of the HTTP side only.
const (
	codeUnauthorized fairway.Code = "unauthorized"
	codeForbidden    fairway.Code = "forbidden"
)

// requestTimeout bounds a request's round trips to the coordinators
// (a bulk action takes longer: bulkTimeout).
const (
	requestTimeout = 15 * time.Second
	bulkTimeout    = 2*time.Minute + 10*time.Second
)

// guard checks the caller's role and CSRF token, then runs the route and
// turns its error into a JSON error reply.
func (s *Server) guard(rt route) http.Handler {
	return securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.identify(r)
		var err error
		switch {
		case c.role < rt.need && c.role == roleNone:
			err = &fairway.Error{Code: codeUnauthorized, Message: "log in: POST /api/login with a token, or send Authorization: Bearer <token>"}
		case c.role < rt.need:
			err = &fairway.Error{Code: codeForbidden, Message: "the read-only role cannot do this: log in with the admin token"}
		case rt.operator && s.cfg.Group != "":
			err = &fairway.Error{Code: codeForbidden, Message: fmt.Sprintf("this dashboard is confined to group %q: executors, limits, weights and periodic tasks are the operators'", s.cfg.Group)}
		case r.Method != http.MethodGet && c.session != "" && (crossSite(r) || r.Header.Get(csrfHeader) != c.csrf):
			err = &fairway.Error{Code: codeForbidden, Message: "missing or wrong " + csrfHeader + " header, or a request from another site: changes need the session's CSRF token (GET /api/session)"}
		default:
			err = s.serve(rt, w, r, c)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// serve runs a route for a caller let through: a read-only caller within
// its limits (readLimits), and every request to the coordinators in its
// role's lane of the operator API (laneOf).
func (s *Server) serve(rt route, w http.ResponseWriter, r *http.Request, c caller) error {
	if rt.need == roleNone {
		return rt.handle(s, w, r, c)
	}
	if c.role == roleRead {
		release, err := s.read.admit(rt.pattern == liveEventsRoute, time.Now())
		if err != nil {
			return err
		}
		defer release()
	}
	r = r.WithContext(events.WithLane(r.Context(), laneOf(c.role)))
	return rt.handle(s, w, r, c)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := fairway.AsError(err)
	status, ok := httpStatus[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if e.Code == fairway.CodeInternal && e.RequestID == "" {
		// An error of this server, not a coordinator's coded reply: log
		// the detail, answer with an id.
		id := fairway.NewID()
		s.log.Error("web request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "error", err)
		e = &fairway.Error{Code: fairway.CodeInternal, Message: "internal error; request id " + id, RequestID: id}
	}
	if status == http.StatusTooManyRequests {
		setRetryAfter(w, err)
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody decodes a JSON request body of at most 1 MiB, refusing unknown
// fields, as the NATS API does.
func readBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fairway.Invalid("body", "not a valid request: %v", err)
	}
	return nil
}

func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestTimeout)
}

// group is the group a request may act on: the confined group, or the one
// it names (a confined server refuses any other).
func (s *Server) group(name string) (string, error) {
	switch {
	case s.cfg.Group != "" && name != "" && name != s.cfg.Group:
		return "", &fairway.Error{Code: fairway.CodeNotFound, Message: fmt.Sprintf("no group %q here: this dashboard is confined to group %q", name, s.cfg.Group)}
	case s.cfg.Group != "":
		return s.cfg.Group, nil
	case name != "":
		return name, fairway.CheckName("group", name)
	}
	return "", nil
}

// redact leaves out what the read-only role may not see.
func redact(c caller, jobs ...*fairway.Job) {
	if c.role == roleAdmin {
		return
	}
	for _, j := range jobs {
		if j != nil {
			j.Args, j.Result = nil, nil
		}
	}
}

// shown is a list of jobs as the caller may see it: redacted, and [] for
// none (not null).
func shown(c caller, jobs []fairway.Job) []fairway.Job {
	for i := range jobs {
		redact(c, &jobs[i])
	}
	if jobs == nil {
		jobs = []fairway.Job{}
	}
	return jobs
}

func (s *Server) apiDocument(w http.ResponseWriter, _ *http.Request, _ caller) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPI)
	return err
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ caller) error {
	var body struct {
		Token string `json:"token"`
	}
	if err := readBody(r, &body); err != nil {
		return err
	}
	if crossSite(r) {
		return &fairway.Error{Code: codeForbidden, Message: "a login from another site's page is refused"}
	}
	rl := s.roleOf(body.Token)
	if rl == roleNone {
		s.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		return &fairway.Error{Code: codeUnauthorized, Message: "unknown token: use web.admin-token or web.read-token (fairway dev writes them to <dev-dir>/web-admin.token and web-read.token)"}
	}
	id, sess := s.sessions.create(rl)
	s.setSessionCookie(w, r, id, int(s.cfg.SessionTTL/time.Second))
	s.log.Info("dashboard login", "role", rl.String(), "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, sessionBody(rl, sess.csrf, s.cfg.Group))
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, c caller) error {
	if c.session != "" {
		if crossSite(r) || r.Header.Get(csrfHeader) != c.csrf {
			return &fairway.Error{Code: codeForbidden, Message: "missing or wrong " + csrfHeader + " header"}
		}
		s.sessions.delete(c.session)
	}
	s.setSessionCookie(w, r, "", -1)
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}

func sessionBody(rl role, csrf, group string) map[string]any {
	return map[string]any{"role": rl.String(), "csrf": csrf, "group": group}
}

func (s *Server) session(w http.ResponseWriter, _ *http.Request, c caller) error {
	if c.role == roleNone {
		return &fairway.Error{Code: codeUnauthorized, Message: "not logged in"}
	}
	writeJSON(w, http.StatusOK, sessionBody(c.role, c.csrf, s.cfg.Group))
	return nil
}

// listFilter reads the job filter of a query string.
func (s *Server) listFilter(c caller, get func(string) string) (events.ListRequest, error) {
	group, err := s.group(get("group"))
	if err != nil {
		return events.ListRequest{}, err
	}
	f := events.ListRequest{Group: group, Task: get("task"), State: fairway.State(get("state")),
		Priority: fairway.Priority(get("priority")), Text: get("text"), Cursor: get("cursor")}
	if f.Text != "" && c.role != roleAdmin {
		// A search over args would tell the read-only role what they hold.
		return f, &fairway.Error{Code: codeForbidden, Message: "the read-only role cannot search args: log in as admin"}
	}
	for _, t := range []struct {
		name string
		to   **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := get(t.name); v != "" {
			tm, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, fairway.Invalid(t.name, "%q is not an RFC 3339 time such as 2026-11-25T08:00:00Z", v)
			}
			*t.to = &tm
		}
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, fairway.Invalid("limit", "%q is not a number", v)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, c caller) error {
	f, err := s.listFilter(c, r.URL.Query().Get)
	if err != nil {
		return err
	}
	f.Full = c.role == roleAdmin && r.URL.Query().Get("full") == "true"
	ctx, cancel := s.ctx(r)
	defer cancel()
	jobs, next, err := s.cfg.Client.ListPage(ctx, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": shown(c, jobs), "next_cursor": next})
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, c caller) error {
	group, err := s.group(r.PathValue("group"))
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	ctx, cancel := s.ctx(r)
	defer cancel()
	job, err := s.cfg.Client.Get(ctx, group, id)
	if err != nil {
		return err
	}
	redact(c, job)
	logs, next, err := s.cfg.Client.LogsPage(ctx, group, events.LogsRequest{ID: id, Limit: 500})
	if err != nil {
		return err
	}
	// The timeline: the job's events still in the stream, from its
	// submission (a little before, for clocks apart) to its end.
	var until time.Time
	if job.Finished != nil {
		until = job.Finished.Add(5 * time.Second)
	}
	evs, more, err := s.cfg.Client.JobEvents(ctx, group, job.Task, id, job.Submitted.Add(-5*time.Second), until)
	if err != nil {
		s.log.Warn("reading a job's events", "group", group, "job_id", id, "error", err)
	}
	if logs == nil {
		logs = []fairway.LogLine{}
	}
	if evs == nil {
		evs = []events.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": job, "logs": logs, "logs_next_cursor": next, "events": evs, "events_more": more})
	return nil
}

// jobGraph answers a job with the jobs it depends on and those that
// depend on it, through depends_on (the graph verb: oldest first, at most
// 500, without args or results).
func (s *Server) jobGraph(w http.ResponseWriter, r *http.Request, c caller) error {
	group, err := s.group(r.PathValue("group"))
	if err != nil {
		return err
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	jobs, truncated, err := s.cfg.Client.GraphTruncated(ctx, group, r.PathValue("id"))
	if err != nil {
		return err
	}
	body := map[string]any{"jobs": shown(c, jobs)}
	if truncated != "" {
		body["truncated"] = truncated // the graph is the job's nearest relatives
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) jobAction(w http.ResponseWriter, r *http.Request, c caller) error {
	group, err := s.group(r.PathValue("group"))
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	ctx, cancel := s.ctx(r)
	defer cancel()
	var job *fairway.Job
	switch action := r.PathValue("action"); action {
	case "cancel":
		job, err = s.cfg.Client.Cancel(ctx, group, id)
	case "retry":
		job, err = s.cfg.Client.Retry(ctx, group, id)
	case "release":
		job, err = s.cfg.Client.Release(ctx, group, id)
	case "priority":
		var body struct {
			Priority fairway.Priority `json:"priority"`
		}
		if err := readBody(r, &body); err != nil {
			return err
		}
		job, err = s.cfg.Client.SetPriority(ctx, group, id, body.Priority)
	default:
		return fairway.Invalid("action", "unknown action %q: use cancel, retry, release or priority", action)
	}
	if err != nil {
		return err
	}
	s.log.Info("job changed from the dashboard", "action", r.PathValue("action"), "group", group, "job_id", id)
	redact(c, job)
	writeJSON(w, http.StatusOK, map[string]any{"job": job})
	return nil
}

func (s *Server) bulk(w http.ResponseWriter, r *http.Request, c caller) error {
	var req events.BulkRequest
	if err := readBody(r, &req); err != nil {
		return err
	}
	if !req.Preview && c.role != roleAdmin {
		return &fairway.Error{Code: codeForbidden, Message: "the read-only role can preview a bulk action, not run it"}
	}
	filter := req.Filter
	get := func(k string) string {
		switch k {
		case "group":
			return filter.Group
		case "text":
			return filter.Text
		}
		return ""
	}
	checked, err := s.listFilter(c, get)
	if err != nil {
		return err
	}
	req.Filter.Group = checked.Group
	ctx, cancel := context.WithTimeout(r.Context(), bulkTimeout)
	defer cancel()
	// A confined server asks through its group's tenant API.
	res, err := s.cfg.Client.Bulk(ctx, s.cfg.Group, req)
	if err != nil {
		return err
	}
	if !req.Preview {
		s.log.Info("bulk action from the dashboard", "action", req.Action, "group", req.Filter.Group, "matched", res.Matched, "changed", res.Changed)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// statsEntry is a cached stats answer: a dashboard of many browsers asks
// the coordinators once per statsTTL per window, bucket and group.
type statsEntry struct {
	at    time.Time
	ttl   time.Duration
	stats *fairway.Stats
}

// Bounds of GET /api/stats (and /api/groups), on top of the coordinators'
// (events.StatsRequest.Durations): a window and a bucket of the lists
// below only, so that however its parameters vary, a client asks for one
// of a few hundred answers, each computed at most once at a time and
// cached (a flood of fresh parameters used to skip the cache, and a stats
// request over 31 days reads every job that ended in them).
var (
	// statsWindows are the windows allowed (the dashboard's are 15m, 1h,
	// 6h and 24h).
	statsWindows = []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
		3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour,
		14 * 24 * time.Hour, 31 * 24 * time.Hour}
	// statsBuckets are the buckets allowed besides the default (a
	// sixtieth of the window), of at most events.StatsBucketsMax in the
	// window.
	statsBuckets = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
)

// statsCacheMax bounds the cached stats answers.
const statsCacheMax = 256

// statsTTL is how long a stats answer is served from the cache: 3 s, and
// 30 s for a window longer than a day (whose buckets are half an hour or
// more wide).
func statsTTL(window time.Duration) time.Duration {
	if window > 24*time.Hour {
		return 30 * time.Second
	}
	return 3 * time.Second
}

// statsRequest reads and checks a stats query: the window and the bucket
// among the allowed ones, normalised ("60m" is "1h"; no bucket is the
// default one), so that equivalent queries share their answer.
func statsRequest(q url.Values) (events.StatsRequest, time.Duration, error) {
	req := events.StatsRequest{Window: q.Get("window"), Bucket: q.Get("bucket")}
	window, bucket, err := req.Durations()
	if err != nil {
		return req, 0, err
	}
	if !slices.Contains(statsWindows, window) {
		return req, 0, fairway.Invalid("window", "%s is not one of the windows allowed: %s", window, durations(statsWindows))
	}
	if req.Bucket != "" && bucket != max(events.StatsBucketMin, window/60) && !slices.Contains(statsBuckets, bucket) {
		var fit []time.Duration
		for _, b := range statsBuckets {
			if b <= window && window/b <= events.StatsBucketsMax {
				fit = append(fit, b)
			}
		}
		return req, 0, fairway.Invalid("bucket", "%s is not one of the buckets allowed for a %s window: %s, or %s (the default: a sixtieth of the window)",
			bucket, window, durations(fit), max(events.StatsBucketMin, window/60))
	}
	req.Window, req.Bucket = window.String(), bucket.String()
	return req, window, nil
}

// durations lists ds as "5m, 15m, 1h".
func durations(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		switch {
		case d%time.Hour == 0:
			out[i] = strconv.Itoa(int(d/time.Hour)) + "h"
		case d%time.Minute == 0:
			out[i] = strconv.Itoa(int(d/time.Minute)) + "m"
		default:
			out[i] = d.String()
		}
	}
	return strings.Join(out, ", ")
}

func (s *Server) loadStats(r *http.Request, c caller) (*fairway.Stats, error) {
	q := r.URL.Query()
	group, err := s.group(q.Get("group"))
	if err != nil {
		return nil, err
	}
	req, window, err := statsRequest(q)
	if err != nil {
		return nil, err
	}
	req.Group = group
	key := req.Window + "|" + req.Bucket + "|" + req.Group
	if st, ok := s.cachedStats(key); ok {
		return st, nil
	}
	// One computation at a time per query and lane: a caller of the
	// read-only role never waits for a computation queued in its lane,
	// nor makes an admin wait for one.
	lane := laneOf(c.role)
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, _, err := s.statsFlight.Do(ctx, lane+"|"+key, func() (*fairway.Stats, error) {
		if st, ok := s.cachedStats(key); ok {
			return st, nil
		}
		// Not the context of the request that started it: its client
		// may leave, the others still wait for the answer.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
		defer cancel()
		via := ""
		if s.cfg.Group != "" {
			via, req.Group = s.cfg.Group, ""
		}
		st, err := s.cfg.Client.Stats(ctx, via, req)
		if err != nil {
			return nil, err
		}
		s.statsMu.Lock()
		defer s.statsMu.Unlock()
		if len(s.statsCache) >= statsCacheMax {
			now := time.Now()
			maps.DeleteFunc(s.statsCache, func(_ string, e statsEntry) bool { return now.Sub(e.at) >= e.ttl })
			if len(s.statsCache) >= statsCacheMax {
				clear(s.statsCache)
			}
		}
		s.statsCache[key] = statsEntry{at: time.Now(), ttl: statsTTL(window), stats: st}
		return st, nil
	})
	return st, err
}

// cachedStats is the cached answer of key, if it is fresh.
func (s *Server) cachedStats(key string) (*fairway.Stats, bool) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	e, ok := s.statsCache[key]
	if !ok || time.Since(e.at) >= e.ttl {
		return nil, false
	}
	return e.stats, true
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, c caller) error {
	st, err := s.loadStats(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// groupRow is one tenant in GET /api/groups: its queue now, and its share
// of the slots in use over the window.
type groupRow struct {
	Group            string    `json:"group"`
	Waiting          int64     `json:"waiting"`
	Running          int64     `json:"running"`
	Pending          int64     `json:"pending"`
	OldestDueSeconds float64   `json:"oldest_due_seconds"`
	Share            []float64 `json:"share"` // per bucket: its running ÷ all running (0 when none ran)
	AvgShare         float64   `json:"avg_share"`
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request, c caller) error {
	st, err := s.loadStats(r, c)
	if err != nil {
		return err
	}
	rows := map[string]*groupRow{}
	row := func(g string) *groupRow {
		if rows[g] == nil {
			rows[g] = &groupRow{Group: g, Share: make([]float64, len(st.Buckets))}
		}
		return rows[g]
	}
	for _, q := range st.Queue {
		g := row(q.Group)
		switch q.State {
		case fairway.StateWaiting, fairway.StateStuck:
			g.Waiting += q.Jobs
			g.OldestDueSeconds = max(g.OldestDueSeconds, q.OldestDueSeconds)
		case fairway.StateScheduled, fairway.StateRunning:
			g.Running += q.Jobs
		case fairway.StatePending:
			g.Pending += q.Jobs
		}
	}
	total := make([]float64, len(st.Buckets))
	for _, gs := range st.Groups {
		for i, v := range gs.Running {
			total[i] += v
		}
	}
	for _, gs := range st.Groups {
		g := row(gs.Group)
		used, mine := 0.0, 0.0
		for i, v := range gs.Running {
			if total[i] > 0 {
				g.Share[i] = v / total[i]
			}
			used += total[i]
			mine += v
		}
		if used > 0 {
			g.AvgShare = mine / used
		}
	}
	out := make([]*groupRow, 0, len(rows))
	for _, g := range rows {
		out = append(out, g)
	}
	sortGroups(out)
	writeJSON(w, http.StatusOK, map[string]any{"groups": out, "buckets": st.Buckets, "bucket_seconds": st.BucketSeconds})
	return nil
}

func (s *Server) executors(w http.ResponseWriter, r *http.Request, _ caller) error {
	ctx, cancel := s.ctx(r)
	defer cancel()
	list, err := s.cfg.Client.Executors(ctx)
	if err != nil {
		return err
	}
	if list == nil {
		list = []fairway.Executor{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"executors": list})
	return nil
}

func (s *Server) partitions(w http.ResponseWriter, r *http.Request, _ caller) error {
	ctx, cancel := s.ctx(r)
	defer cancel()
	list, err := s.cfg.Client.Partitions(ctx)
	if err != nil {
		return err
	}
	if list == nil {
		list = []fairway.Partition{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitions": list})
	return nil
}

func (s *Server) drain(w http.ResponseWriter, r *http.Request, _ caller) error {
	ctx, cancel := s.ctx(r)
	defer cancel()
	app := r.PathValue("app")
	if err := s.cfg.Client.Drain(ctx, app); err != nil {
		return err
	}
	s.log.Info("executor drained from the dashboard", "executor", app)
	writeJSON(w, http.StatusOK, map[string]any{"draining": app})
	return nil
}

// limits answers the cluster's concurrency limits, each with the jobs its
// task or group holds now, and its rate limits: as they are (GET), or once
// one is set (PUT, body {"max": N}, or {"rate": "10/s"} for kind rate,
// whose name is a scope such as task:send-mail,group:*) or removed
// (DELETE). The coordinators check kind, name, scope, max and rate.
func (s *Server) limits(w http.ResponseWriter, r *http.Request, _ caller) error {
	kind, name := r.PathValue("kind"), r.PathValue("name")
	ctx, cancel := s.ctx(r)
	defer cancel()
	var (
		list  []fairway.Limit
		rates []fairway.RateLimit
		err   error
	)
	switch {
	case r.Method == http.MethodPut:
		var body struct {
			Max  *int    `json:"max"`
			Rate *string `json:"rate"`
		}
		if err := readBody(r, &body); err != nil {
			return err
		}
		switch {
		case kind == "rate" && body.Max != nil:
			return fairway.Invalid("max", "a rate limit takes a rate (N/period, such as 10/s), not a max")
		case kind == "rate" && body.Rate == nil:
			return fairway.Invalid("rate", "missing: how many jobs may start per period (N/period: 10/s, 100/m, 5000/h, 5/30s)")
		case kind == "rate":
			rates, err = s.cfg.Client.SetRateLimit(ctx, name, *body.Rate)
		case body.Rate != nil:
			return fairway.Invalid("rate", "a concurrency limit takes a max; a rate is set on /api/limits/rate/{scope}")
		case body.Max == nil:
			return fairway.Invalid("max", "missing: how many jobs may be held at once (0 stops new claims)")
		default:
			list, err = s.cfg.Client.SetLimit(ctx, kind, name, *body.Max)
		}
	case r.Method == http.MethodDelete && kind == "rate":
		rates, err = s.cfg.Client.DeleteRateLimit(ctx, name)
	case r.Method == http.MethodDelete:
		list, err = s.cfg.Client.DeleteLimit(ctx, kind, name)
	default:
		list, err = s.cfg.Client.Limits(ctx)
	}
	if err != nil {
		return err
	}
	// A change answers one kind of limit: ask for the other.
	if kind == "rate" {
		list, err = s.cfg.Client.Limits(ctx)
	} else {
		rates, err = s.cfg.Client.RateLimits(ctx)
	}
	if err != nil {
		return err
	}
	switch {
	case r.Method != http.MethodGet && kind == "rate":
		s.log.Info("rate limit changed from the dashboard", "method", r.Method, "scope", name)
	case r.Method != http.MethodGet:
		s.log.Info("concurrency limit changed from the dashboard", "method", r.Method, "kind", kind, "name", name)
	}
	if list == nil {
		list = []fairway.Limit{}
	}
	if rates == nil {
		rates = []fairway.RateLimit{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"limits": list, "rates": rates})
	return nil
}

// periodicRow is a periodic task with its next runs, in the zone of its
// timer, which Zone names (an IANA name, or UTC; empty when the timer
// does not parse).
type periodicRow struct {
	fairway.PeriodicTask
	NextRuns []time.Time `json:"next_runs"`
	Zone     string      `json:"zone"`
}

// nextRunsShown is how many coming runs of each timer the dashboard shows.
const nextRunsShown = 5

func (s *Server) periodic(w http.ResponseWriter, r *http.Request, c caller) error {
	ctx, cancel := s.ctx(r)
	defer cancel()
	tasks, err := s.cfg.Client.ListPeriodic(ctx)
	if err != nil {
		return err
	}
	rows := make([]periodicRow, 0, len(tasks))
	for _, p := range tasks {
		if c.role != roleAdmin {
			p.Args = nil
		}
		row := periodicRow{PeriodicTask: p, NextRuns: []time.Time{}}
		timer, err := calendar.ParseTimer(p.Timer)
		if err == nil {
			row.Zone = timer.Location().String()
		}
		if err == nil && p.Enabled {
			row.NextRuns = calendar.Upcoming(timer, p.NextRun, nextRunsShown)
		}
		rows = append(rows, row)
	}
	writeJSON(w, http.StatusOK, map[string]any{"periodic": rows})
	return nil
}

func (s *Server) periodicAction(w http.ResponseWriter, r *http.Request, _ caller) error {
	ctx, cancel := s.ctx(r)
	defer cancel()
	id := r.PathValue("id")
	var (
		p   *fairway.PeriodicTask
		err error
	)
	switch action := r.PathValue("action"); action {
	case "enable", "disable":
		p, err = s.cfg.Client.SetPeriodic(ctx, id, action == "enable")
	case "run":
		p, err = s.cfg.Client.RunPeriodicNow(ctx, id)
	default:
		return fairway.Invalid("action", "unknown action %q: use enable, disable or run", action)
	}
	if err != nil {
		return err
	}
	s.log.Info("periodic task changed from the dashboard", "action", r.PathValue("action"), "periodic", id)
	writeJSON(w, http.StatusOK, map[string]any{"periodic": p})
	return nil
}

// Routes lists the HTTP API's routes as "METHOD /path" (for the test that
// holds them to the OpenAPI document).
func Routes() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.pattern
	}
	return out
}

// sortGroups orders groups by most waiting, then by name.
func sortGroups(gs []*groupRow) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Waiting != gs[j].Waiting {
			return gs[i].Waiting > gs[j].Waiting
		}
		return gs[i].Group < gs[j].Group
	})
}
