package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/internal/web"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const (
	adminToken = "admin-token-0123456789"
	readToken  = "read-token-0123456789"
)

type bundle struct {
	t      *testing.T
	url    string
	client *events.Client
	ex     *executor.Executor // w1
}

// setup runs a real coordinator and executor (PostgreSQL, embedded NATS)
// and the web server in front of them; group confines it to one tenant.
func setup(t *testing.T, group string) *bundle {
	t.Helper()
	ns, nc := natstest.Start(t)
	retries := 0
	coord, err := coordinator.New(storetest.Public(storetest.Open(t)), nc, coordinator.Config{Retries: &retries})
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)
	enc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(enc.Close)
	ex, err := executor.New(enc, executor.Config{AppID: "w1", PoolSize: 2, Heartbeat: time.Second})
	require.NoError(t, err)
	ex.Handle("echo", func(_ context.Context, job *executor.Job) error { return job.SetResult(job.Args) })
	ex.Handle("fail", func(context.Context, *executor.Job) error { return fairway.Permanent(errBoom) })
	// tick runs for 5 ms: a slot-time that no clock's resolution rounds
	// to nothing (echo's may be 0 s).
	ex.Handle("tick", func(ctx context.Context, _ *executor.Job) error {
		select {
		case <-time.After(5 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	require.NoError(t, ex.Start(t.Context()))
	t.Cleanup(ex.Stop)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	srv, err := web.New(web.Config{Client: client, AdminToken: adminToken, ReadToken: readToken, Group: group})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &bundle{t: t, url: hs.URL, client: client, ex: ex}
}

var errBoom = &fairway.Error{Code: fairway.CodeInvalid, Message: "boom"}

// call sends a request with a bearer token ("" for none) and decodes the
// answer into out; it returns the status.
func (b *bundle) call(method, path, token string, body, out any) int {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(b.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	if out != nil {
		require.NoError(b.t, json.NewDecoder(res.Body).Decode(out))
	}
	return res.StatusCode
}

// submit stores a job and waits until it has ended; it returns it then.
func (b *bundle) submit(group, task, args string) *fairway.Job {
	b.t.Helper()
	id := fairway.NewID()
	final := make(chan struct{}, 1)
	sub, err := b.client.Subscribe(b.t.Context(), events.Filter{Group: group}, func(ev events.Event) {
		if ev.JobID == id && ev.State.Final() {
			final <- struct{}{}
		}
	})
	require.NoError(b.t, err)
	defer sub.Stop()
	_, err = b.client.SubmitWait(b.t.Context(), fairway.Submission{ID: id, Group: group, Task: task, Args: []byte(args)})
	require.NoError(b.t, err)
	select {
	case <-final:
	case <-time.After(20 * time.Second):
		b.t.Fatalf("job %s did not end", id)
	}
	job, err := b.client.Get(b.t.Context(), group, id)
	require.NoError(b.t, err)
	return job
}

type apiError struct {
	Error fairway.Error `json:"error"`
}

// TestRolesAndRedaction: no token is 401; the read-only role sees jobs
// without args or results, cannot search args, cannot change anything
// (403, and the job is unchanged), but can preview a bulk action; admin
// sees and changes.
func TestRolesAndRedaction(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	failed := b.submit("acme", "fail", `{"secret": "s3cr3t"}`)
	require.Equal(t, fairway.StateFailed, failed.State)
	ok := b.submit("acme", "echo", `{"secret": "s3cr3t"}`)

	var e apiError
	require.Equal(t, http.StatusUnauthorized, b.call("GET", "/api/jobs", "", nil, &e))
	require.Equal(t, "unauthorized", string(e.Error.Code))
	require.Equal(t, http.StatusUnauthorized, b.call("GET", "/api/jobs", "wrong-token-0123456789", nil, &e))

	var page struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs?full=true", readToken, nil, &page))
	require.Len(t, page.Jobs, 2)
	for _, j := range page.Jobs {
		require.NotContains(t, string(j), "s3cr3t", "the read-only role sees no args or results")
	}
	var detail struct {
		Job    fairway.Job    `json:"job"`
		Events []events.Event `json:"events"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs/acme/"+ok.ID, readToken, nil, &detail))
	require.Contains(t, []string{"", "null"}, string(detail.Job.Args))
	require.Contains(t, []string{"", "null"}, string(detail.Job.Result))
	require.Equal(t, http.StatusForbidden, b.call("GET", "/api/jobs?text=s3cr3t", readToken, nil, &e), "a search over args would leak them")
	require.Equal(t, http.StatusForbidden, b.call("POST", "/api/jobs/acme/"+failed.ID+"/retry", readToken, nil, &e))
	require.Equal(t, "forbidden", string(e.Error.Code))
	var bulk events.BulkResult
	require.Equal(t, http.StatusOK, b.call("POST", "/api/bulk", readToken, events.BulkRequest{Action: "retry", Preview: true, Filter: events.ListRequest{State: fairway.StateFailed}}, &bulk))
	require.Equal(t, 1, bulk.Matched)
	require.Equal(t, http.StatusForbidden, b.call("POST", "/api/bulk", readToken, events.BulkRequest{Action: "retry", Filter: events.ListRequest{State: fairway.StateFailed}}, &e))
	job, err := b.client.Get(t.Context(), "acme", failed.ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateFailed, job.State, "nothing the read-only role asked changed it")

	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs/acme/"+ok.ID, adminToken, nil, &detail))
	require.JSONEq(t, `{"secret": "s3cr3t"}`, string(detail.Job.Args))
	require.JSONEq(t, `{"secret": "s3cr3t"}`, string(detail.Job.Result))
	var states []string
	for _, ev := range detail.Events {
		states = append(states, string(ev.State))
	}
	require.Equal(t, []string{"waiting", "scheduled", "running", "success"}, states, "the timeline, from the event stream")
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs?text=S3CR3T", adminToken, nil, &page))
	require.Len(t, page.Jobs, 2)
	var changed struct {
		Job fairway.Job `json:"job"`
	}
	require.Equal(t, http.StatusOK, b.call("POST", "/api/jobs/acme/"+failed.ID+"/retry", adminToken, nil, &changed))
	require.Equal(t, fairway.StateWaiting, changed.Job.State)
	require.Equal(t, http.StatusConflict, b.call("POST", "/api/jobs/acme/"+ok.ID+"/cancel", adminToken, nil, &e), "a finished job")
	require.Equal(t, "conflict", string(e.Error.Code))
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs/acme/nope", adminToken, nil, &e))
	require.Equal(t, http.StatusBadRequest, b.call("GET", "/api/stats?window=soon", adminToken, nil, &e))
	require.Equal(t, "window", e.Error.Field)
}

// TestBrowserSessionNeedsCSRF: a browser logs in and gets a session
// cookie; a change without the session's CSRF token, or from another
// site, is refused; with it, it is done; a login from another site's page
// is refused; logout ends the session.
func TestBrowserSessionNeedsCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	do := func(method, path string, body any, headers map[string]string) (int, map[string]any) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, b.url+path, bytes.NewReader(data))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := browser.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	status, _ := do("POST", "/api/login", map[string]string{"token": adminToken}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, status, "a login from another site")
	status, _ = do("POST", "/api/login", map[string]string{"token": "nope-nope-nope-nope"}, nil)
	require.Equal(t, http.StatusUnauthorized, status)
	status, sess := do("POST", "/api/login", map[string]string{"token": adminToken}, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "admin", sess["role"])
	csrf, _ := sess["csrf"].(string)
	require.NotEmpty(t, csrf)

	later := time.Now().Add(time.Hour)
	reply, err := b.client.SubmitReply(t.Context(), fairway.Submission{Group: "acme", Task: "echo", RunAt: &later})
	require.NoError(t, err)
	cancelPath := "/api/jobs/acme/" + reply.ID + "/cancel"
	status, _ = do("POST", cancelPath, nil, nil)
	require.Equal(t, http.StatusForbidden, status, "no CSRF token")
	status, _ = do("POST", cancelPath, nil, map[string]string{"X-CSRF-Token": "guess"})
	require.Equal(t, http.StatusForbidden, status, "a wrong CSRF token")
	status, _ = do("POST", cancelPath, nil, map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusForbidden, status, "from another site, token or not")
	job, err := b.client.Get(t.Context(), "acme", reply.ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State, "none of those changed it")
	status, _ = do("POST", cancelPath, nil, map[string]string{"X-CSRF-Token": csrf})
	require.Equal(t, http.StatusOK, status)
	status, _ = do("PUT", "/api/limits/task/echo", map[string]int{"max": 3}, nil)
	require.Equal(t, http.StatusForbidden, status, "a PUT needs the CSRF token too")
	status, _ = do("PUT", "/api/limits/task/echo", map[string]int{"max": 3}, map[string]string{"X-CSRF-Token": csrf})
	require.Equal(t, http.StatusOK, status)
	status, _ = do("DELETE", "/api/limits/task/echo", nil, nil)
	require.Equal(t, http.StatusForbidden, status, "so does a DELETE")
	status, _ = do("DELETE", "/api/limits/task/echo", nil, map[string]string{"X-CSRF-Token": csrf})
	require.Equal(t, http.StatusOK, status)
	status, _ = do("GET", "/api/session", nil, nil)
	require.Equal(t, http.StatusOK, status)
	status, _ = do("POST", "/api/logout", nil, map[string]string{"X-CSRF-Token": csrf})
	require.Equal(t, http.StatusOK, status)
	status, _ = do("GET", "/api/session", nil, nil)
	require.Equal(t, http.StatusUnauthorized, status)
}

// TestConfinedToOneGroup: a dashboard confined to a group answers for
// that group only, through its tenant API; another group's jobs are not
// found, and the operators' views are forbidden.
func TestConfinedToOneGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, "acme")
	mine := b.submit("acme", "echo", `{}`)
	theirs := b.submit("globex", "echo", `{}`)
	var page struct {
		Jobs []fairway.Job `json:"jobs"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs", adminToken, nil, &page))
	require.Len(t, page.Jobs, 1)
	require.Equal(t, mine.ID, page.Jobs[0].ID)
	var e apiError
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs?group=globex", adminToken, nil, &e))
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs/globex/"+theirs.ID, adminToken, nil, &e))
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs/acme/"+theirs.ID, adminToken, nil, &e), "globex's id in acme's group")
	require.Equal(t, http.StatusForbidden, b.call("GET", "/api/executors", adminToken, nil, &e))
	require.Equal(t, http.StatusForbidden, b.call("POST", "/api/executors/w1/drain", adminToken, nil, &e))
	require.Equal(t, http.StatusForbidden, b.call("GET", "/api/limits", adminToken, nil, &e), "limits are the operators'")
	require.Equal(t, http.StatusForbidden, b.call("PUT", "/api/limits/group/acme", adminToken, map[string]int{"max": 100}, &e))
	require.Contains(t, e.Error.Message, "confined to group")
	require.Equal(t, http.StatusForbidden, b.call("DELETE", "/api/limits/group/acme", adminToken, nil, &e))
	limits, err := b.client.Limits(t.Context())
	require.NoError(t, err)
	require.Empty(t, limits, "nothing the confined dashboard asked was set")
	var st fairway.Stats
	require.Equal(t, http.StatusOK, b.call("GET", "/api/stats?window=15m", adminToken, nil, &st))
	for _, g := range st.Groups {
		require.Equal(t, "acme", g.Group)
	}
	var bulk events.BulkResult
	require.Equal(t, http.StatusOK, b.call("POST", "/api/bulk", adminToken, events.BulkRequest{Action: "cancel", Preview: true}, &bulk))
	require.Equal(t, 1, bulk.Matched, "acme's one job, not globex's")
}

// TestLimits: the concurrency limits are listed to both roles, and set
// and removed by admin only; the coordinators' refusals come back with
// their status and field; the answers of a change are the limits now.
func TestLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	type limitsBody struct {
		Limits []fairway.Limit `json:"limits"`
	}
	var got limitsBody
	require.Equal(t, http.StatusOK, b.call("GET", "/api/limits", readToken, nil, &got))
	require.NotNil(t, got.Limits, "none is [], not null")
	require.Empty(t, got.Limits)

	require.Equal(t, http.StatusOK, b.call("PUT", "/api/limits/task/echo", adminToken, map[string]int{"max": 2}, &got))
	require.Len(t, got.Limits, 1)
	l := got.Limits[0]
	require.Equal(t, []any{"task", "echo", 2, 0}, []any{l.Kind, l.Name, l.Max, l.Held})
	require.WithinDuration(t, time.Now(), l.Updated, time.Minute)
	require.Equal(t, http.StatusOK, b.call("PUT", "/api/limits/group/*", adminToken, map[string]int{"max": 5}, &got), "* is every group without a limit of its own")
	require.Equal(t, http.StatusOK, b.call("PUT", "/api/limits/task/echo", adminToken, map[string]int{"max": 3}, &got), "set again: changed")
	require.Equal(t, http.StatusOK, b.call("GET", "/api/limits", readToken, nil, &got))
	byKey := map[string]int{}
	for _, l := range got.Limits {
		byKey[l.Kind+" "+l.Name] = l.Max
	}
	require.Equal(t, map[string]int{"task echo": 3, "group *": 5}, byKey)
	job := b.submit("acme", "echo", `{}`)
	require.Equal(t, fairway.StateSuccess, job.State, "under its limits a job runs")

	var e apiError
	require.Equal(t, http.StatusForbidden, b.call("PUT", "/api/limits/task/echo", readToken, map[string]int{"max": 9}, &e))
	require.Equal(t, "forbidden", string(e.Error.Code))
	require.Equal(t, http.StatusForbidden, b.call("DELETE", "/api/limits/task/echo", readToken, nil, &e))
	require.Equal(t, http.StatusUnauthorized, b.call("GET", "/api/limits", "", nil, &e))
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"PUT", "/api/limits/queue/echo", map[string]int{"max": 1}, "kind"},
		{"DELETE", "/api/limits/queue/echo", nil, "kind"},
		{"PUT", "/api/limits/task/*", map[string]int{"max": 1}, "name"}, // * is for groups
		{"PUT", "/api/limits/task/echo", map[string]int{"max": -1}, "max"},
		{"PUT", "/api/limits/task/echo", map[string]any{}, "max"},
		{"PUT", "/api/limits/task/echo", map[string]any{"max": 1, "min": 0}, "body"},
	} {
		require.Equal(t, http.StatusBadRequest, b.call(c.method, c.path, adminToken, c.body, &e), "%s %s %v", c.method, c.path, c.body)
		require.Equal(t, "invalid", string(e.Error.Code))
		require.Equal(t, c.field, e.Error.Field, "%s %s %v: %s", c.method, c.path, c.body, e.Error.Message)
	}
	require.Equal(t, http.StatusNotFound, b.call("DELETE", "/api/limits/group/acme", adminToken, nil, &e), "acme has no limit of its own")
	require.Equal(t, "not_found", string(e.Error.Code))

	require.Equal(t, http.StatusOK, b.call("DELETE", "/api/limits/task/echo", adminToken, nil, &got))
	require.Len(t, got.Limits, 1)
	require.Equal(t, "*", got.Limits[0].Name)
	require.Equal(t, http.StatusOK, b.call("DELETE", "/api/limits/group/*", adminToken, nil, &got))
	require.NotNil(t, got.Limits)
	require.Empty(t, got.Limits)
	limits, err := b.client.Limits(t.Context())
	require.NoError(t, err)
	require.Empty(t, limits, "removed in the coordinators, not only in the answer")
}

// TestDrainOfAnExecutorThatLeft (issue 22): a drain names a live
// executor; one that has left (deregistered, or gone) is refused with a
// conflict that says so, and an unknown one is not found.
func TestDrainOfAnExecutorThatLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(t, b.ex.Shutdown(ctx))
	var list struct {
		Executors []fairway.Executor `json:"executors"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/executors", adminToken, nil, &list))
	require.Len(t, list.Executors, 1)
	require.Equal(t, fairway.ExecutorDeregistered, list.Executors[0].State)
	var e apiError
	require.Equal(t, http.StatusConflict, b.call("POST", "/api/executors/w1/drain", adminToken, nil, &e))
	require.Equal(t, fairway.CodeConflict, e.Error.Code)
	require.Equal(t, `executor "w1" is deregistered: nothing to drain`, e.Error.Message)
	require.Equal(t, http.StatusNotFound, b.call("POST", "/api/executors/w2/drain", adminToken, nil, &e))
	require.Contains(t, e.Error.Message, `no executor "w2"`)
}

// TestOpenAPIDocumentsEveryRoute: the OpenAPI document is 3.1, and its
// paths and methods are exactly the server's routes.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/openapi.json", "", nil, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, r := range web.Routes() {
		served[r] = true
	}
	require.Equal(t, served, documented)
	// Every documented path is served: the answer is the API's JSON, not
	// the router's "404 page not found" (the live stream is left out: it
	// does not end).
	param := regexp.MustCompile(`\{[^}]+\}`)
	for route := range served {
		method, path, _ := strings.Cut(route, " ")
		if path == "/api/events" {
			continue
		}
		path = param.ReplaceAllString(path, "x")
		req, err := http.NewRequest(method, b.url+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, "application/json", res.Header.Get("Content-Type"), "%s %s: %d", method, path, res.StatusCode)
		require.NotEqual(t, http.StatusMethodNotAllowed, res.StatusCode, "%s %s", method, path)
	}
}

// TestJobGraph: GET /api/jobs/{group}/{id}/graph answers the job with
// the jobs it depends on and those that depend on it, to the read-only
// role too; a dashboard confined to a group does not find another group's
// job, and an unknown job is not found.
func TestJobGraph(t *testing.T) {
	t.Parallel()
	b := setup(t, "acme")
	echo := func(ref string, deps ...string) fairway.WorkflowJob {
		return fairway.WorkflowJob{Ref: ref, Submission: fairway.Submission{Task: "echo", DependsOn: deps}}
	}
	refs, err := b.client.SubmitWorkflow(t.Context(), "acme", fairway.Workflow{Jobs: []fairway.WorkflowJob{
		echo("fetch"), echo("parse", "fetch"), echo("render", "fetch"), echo("mail", "parse", "render")}})
	require.NoError(t, err)
	theirs, err := b.client.SubmitWorkflow(t.Context(), "globex", fairway.Workflow{Jobs: []fairway.WorkflowJob{echo("a"), echo("b", "a")}})
	require.NoError(t, err)

	var graph struct {
		Jobs      []fairway.Job `json:"jobs"`
		Truncated string        `json:"truncated"`
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs/acme/"+refs["parse"]+"/graph", readToken, nil, &graph))
	var ids []string
	for _, j := range graph.Jobs {
		ids = append(ids, j.ID)
	}
	require.ElementsMatch(t, []string{refs["fetch"], refs["parse"], refs["mail"]}, ids, "parse's ancestors and descendants, not its sibling render")
	for _, j := range graph.Jobs {
		if j.ID == refs["mail"] {
			require.ElementsMatch(t, []string{refs["parse"], refs["render"]}, j.DependsOn)
		}
	}
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs/acme/"+refs["fetch"]+"/graph", adminToken, nil, &graph))
	require.Len(t, graph.Jobs, 4)
	require.Empty(t, graph.Truncated, "a whole graph")
	// A graph beyond 500 jobs is cut short, and the answer says so.
	fan := []fairway.WorkflowJob{echo("root")}
	for i := range 599 {
		fan = append(fan, echo(fmt.Sprintf("leaf-%d", i), "root"))
	}
	big, err := b.client.SubmitWorkflow(t.Context(), "acme", fairway.Workflow{Jobs: fan})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, b.call("GET", "/api/jobs/acme/"+big["root"]+"/graph", adminToken, nil, &graph))
	require.Contains(t, graph.Truncated, "graph truncated")
	require.LessOrEqual(t, len(graph.Jobs), 500)

	var e apiError
	require.Equal(t, http.StatusUnauthorized, b.call("GET", "/api/jobs/acme/"+refs["fetch"]+"/graph", "", nil, &e))
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs/globex/"+theirs["b"]+"/graph", adminToken, nil, &e))
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs/acme/"+theirs["b"]+"/graph", adminToken, nil, &e), "globex's id in acme's group")
	require.Equal(t, http.StatusNotFound, b.call("GET", "/api/jobs/acme/nope/graph", adminToken, nil, &e))
	require.Equal(t, "not_found", string(e.Error.Code))
}
