package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

type sharesBody struct {
	Window string               `json:"window"`
	Groups []fairway.GroupShare `json:"groups"`
}

// byGroup indexes the shares by group.
func byGroup(shares []fairway.GroupShare) map[string]fairway.GroupShare {
	out := map[string]fairway.GroupShare{}
	for _, s := range shares {
		out[s.Group] = s
	}
	return out
}

// TestSharesAndWeights: GET /api/shares answers each group's share of the
// slot-time against its weighted fair share, to both roles, over the
// windows allowed; PUT /api/weights/{group} sets a weight, admin only and
// with the session's CSRF token, the coordinators' refusals coming back
// with their field; a read right after a weight is set sees it (the
// cached answer is dropped); a dashboard confined to a group has neither.
func TestSharesAndWeights(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	var got sharesBody
	require.Equal(t, http.StatusOK, b.call("GET", "/api/shares", readToken, nil, &got))
	require.Equal(t, "1h", got.Window)
	require.NotNil(t, got.Groups, "none is [], not null")
	require.Empty(t, got.Groups)

	var e apiError
	require.Equal(t, http.StatusUnauthorized, b.call("GET", "/api/shares", "", nil, &e))
	for _, w := range []string{"48h", "soon", "7m"} {
		require.Equal(t, http.StatusBadRequest, b.call("GET", "/api/shares?window="+w, readToken, nil, &e), w)
		require.Equal(t, "window", e.Error.Field, w)
		require.Contains(t, e.Error.Message, "5m, 15m, 30m, 1h, 2h, 3h, 6h, 12h, 24h", w)
	}
	require.Equal(t, http.StatusForbidden, b.call("PUT", "/api/weights/acme", readToken, map[string]float64{"weight": 3}, &e))
	require.Equal(t, "forbidden", string(e.Error.Code))
	for _, c := range []struct {
		path  string
		body  any
		field string
	}{
		{"/api/weights/acme", map[string]float64{"weight": 0}, "weight"},
		{"/api/weights/acme", map[string]float64{"weight": 1001}, "weight"},
		{"/api/weights/acme", map[string]any{}, "weight"},
		{"/api/weights/acme", map[string]any{"weight": 3, "max": 1}, "body"},
		{"/api/weights/" + url.PathEscape("no such group!"), map[string]float64{"weight": 2}, "group"},
	} {
		require.Equal(t, http.StatusBadRequest, b.call("PUT", c.path, adminToken, c.body, &e), "%s %v", c.path, c.body)
		require.Equal(t, "invalid", string(e.Error.Code))
		require.Equal(t, c.field, e.Error.Field, "%s %v: %s", c.path, c.body, e.Error.Message)
	}

	for _, g := range []string{"acme", "globex", "acme", "globex"} {
		require.Equal(t, fairway.StateSuccess, b.submit(g, "tick", `{}`).State)
	}
	// The shares are read from the finished jobs' records, which the
	// journal's leader writes in batches after their events: no event says
	// when, so the read is tried until both groups' runs are in.
	var shares map[string]fairway.GroupShare
	require.Eventually(t, func() bool {
		if b.call("GET", "/api/shares?window=15m", readToken, nil, &got) != http.StatusOK {
			return false
		}
		shares = byGroup(got.Groups)
		return len(shares) == 2 && shares["acme"].Seconds > 0 && shares["globex"].Seconds > 0
	}, 20*time.Second, 20*time.Millisecond, "both groups' runs in the shares")
	require.Equal(t, "15m", got.Window)
	require.InDelta(t, 1, shares["acme"].Share+shares["globex"].Share, 1e-9)
	require.Positive(t, shares["acme"].Seconds)
	require.Equal(t, 1.0, shares["acme"].Weight)
	require.InDelta(t, 0.5, shares["acme"].FairShare, 1e-9)

	require.Equal(t, http.StatusOK, b.call("PUT", "/api/weights/acme", adminToken, map[string]float64{"weight": 3}, &got))
	require.Equal(t, "1h", got.Window, "a weight set answers the last hour")
	shares = byGroup(got.Groups)
	require.Equal(t, 3.0, shares["acme"].Weight)
	require.InDelta(t, 0.75, shares["acme"].FairShare, 1e-9)
	require.InDelta(t, 0.25, shares["globex"].FairShare, 1e-9)
	// Read at once: not the answer cached a moment ago, with weight 1.
	require.Equal(t, http.StatusOK, b.call("GET", "/api/shares?window=15m", readToken, nil, &got))
	shares = byGroup(got.Groups)
	require.Equal(t, 3.0, shares["acme"].Weight, "a weight set drops the cached shares")
	require.InDelta(t, 0.75, shares["acme"].FairShare, 1e-9)
	fromNATS, err := b.client.Groups(t.Context(), "1h")
	require.NoError(t, err)
	require.Equal(t, 3.0, byGroup(fromNATS)["acme"].Weight, "set in the coordinators, not only in the answer")

	// A browser session needs its CSRF token to set a weight.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	put := func(path string, body any, headers map[string]string) (int, []byte) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, err := http.NewRequest(http.MethodPut, b.url+path, bytes.NewReader(data))
		require.NoError(t, err)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := browser.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(res.Body)
		return res.StatusCode, out.Bytes()
	}
	data, _ := json.Marshal(map[string]string{"token": adminToken})
	res, err := browser.Post(b.url+"/api/login", "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	var sess struct{ CSRF string }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&sess))
	res.Body.Close()
	status, _ := put("/api/weights/globex", map[string]float64{"weight": 2}, nil)
	require.Equal(t, http.StatusForbidden, status, "no CSRF token")
	status, body := put("/api/weights/globex", map[string]float64{"weight": 2}, map[string]string{"X-CSRF-Token": sess.CSRF})
	require.Equal(t, http.StatusOK, status, "%s", body)

	confined := setup(t, "acme")
	require.Equal(t, http.StatusForbidden, confined.call("GET", "/api/shares", adminToken, nil, &e), "shares are the operators'")
	require.Contains(t, e.Error.Message, "confined to group")
	require.Equal(t, http.StatusForbidden, confined.call("PUT", "/api/weights/acme", adminToken, map[string]float64{"weight": 9}, &e))
	fromNATS, err = confined.client.Groups(t.Context(), "1h")
	require.NoError(t, err)
	require.Empty(t, fromNATS, "nothing the confined dashboard asked was set")
}

// TestRateLimits: the rate limits are listed with the concurrency limits
// to both roles, and set (PUT /api/limits/rate/{scope}, {"rate": "10/s"})
// and removed by admin only; every answer holds both kinds; the
// coordinators' refusals come back with their field.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	type limitsBody struct {
		Limits []fairway.Limit     `json:"limits"`
		Rates  []fairway.RateLimit `json:"rates"`
	}
	var got limitsBody
	require.Equal(t, http.StatusOK, b.call("GET", "/api/limits", readToken, nil, &got))
	require.NotNil(t, got.Rates, "none is [], not null")
	require.Empty(t, got.Rates)

	require.Equal(t, http.StatusOK, b.call("PUT", "/api/limits/rate/task:echo", adminToken, map[string]string{"rate": "10/s"}, &got))
	require.Len(t, got.Rates, 1)
	require.Equal(t, fairway.RateLimit{Task: "echo", Rate: "10/s"}, fairway.RateLimit{Task: got.Rates[0].Task, Group: got.Rates[0].Group, Rate: got.Rates[0].Rate})
	require.NotNil(t, got.Limits)
	each := "/api/limits/rate/" + url.PathEscape("task:echo,group:*")
	require.Equal(t, http.StatusOK, b.call("PUT", each, adminToken, map[string]string{"rate": "5/30s"}, &got))
	require.Equal(t, http.StatusOK, b.call("PUT", "/api/limits/rate/group:*", adminToken, map[string]string{"rate": "100/m"}, &got))
	require.Equal(t, http.StatusOK, b.call("PUT", "/api/limits/task/echo", adminToken, map[string]int{"max": 2}, &got))
	require.Len(t, got.Limits, 1, "a concurrency limit's change answers both kinds")
	require.Len(t, got.Rates, 3)
	got = limitsBody{} // json decodes into the elements there: a field left out (omitempty) would stay
	require.Equal(t, http.StatusOK, b.call("GET", "/api/limits", readToken, nil, &got))
	byScope := map[string]string{}
	for _, r := range got.Rates {
		byScope[r.Scope()] = r.Rate
	}
	require.Equal(t, map[string]string{"task:echo": "10/s", "task:echo,group:*": "5/30s", "group:*": "100/m"}, byScope)
	require.Len(t, got.Limits, 1)
	require.Equal(t, fairway.StateSuccess, b.submit("acme", "echo", `{}`).State, "under its rates a job runs")

	var e apiError
	require.Equal(t, http.StatusForbidden, b.call("PUT", "/api/limits/rate/task:echo", readToken, map[string]string{"rate": "1/s"}, &e))
	require.Equal(t, http.StatusForbidden, b.call("DELETE", "/api/limits/rate/task:echo", readToken, nil, &e))
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"PUT", "/api/limits/rate/task:echo", map[string]any{}, "rate"},
		{"PUT", "/api/limits/rate/task:echo", map[string]any{"max": 1}, "max"},
		{"PUT", "/api/limits/rate/task:echo", map[string]string{"rate": "10"}, "rate"},
		{"PUT", "/api/limits/rate/task:echo", map[string]string{"rate": "0/s"}, "rate"},
		{"PUT", "/api/limits/rate/queue:echo", map[string]string{"rate": "1/s"}, "scope"},
		{"DELETE", "/api/limits/rate/queue:echo", nil, "scope"},
		{"PUT", "/api/limits/task/echo", map[string]string{"rate": "1/s"}, "rate"},
	} {
		require.Equal(t, http.StatusBadRequest, b.call(c.method, c.path, adminToken, c.body, &e), "%s %s %v", c.method, c.path, c.body)
		require.Equal(t, "invalid", string(e.Error.Code))
		require.Equal(t, c.field, e.Error.Field, "%s %s %v: %s", c.method, c.path, c.body, e.Error.Message)
	}
	require.Equal(t, http.StatusNotFound, b.call("DELETE", "/api/limits/rate/task:nope", adminToken, nil, &e))
	require.Equal(t, "not_found", string(e.Error.Code))

	require.Equal(t, http.StatusOK, b.call("DELETE", "/api/limits/rate/task:echo,group:*", adminToken, nil, &got), "the scope unescaped as well")
	require.Len(t, got.Rates, 2)
	require.Len(t, got.Limits, 1, "a rate limit's change answers both kinds")
	rates, err := b.client.RateLimits(t.Context())
	require.NoError(t, err)
	require.Len(t, rates, 2, "removed in the coordinators, not only in the answer")
	for _, r := range rates {
		require.NotEqual(t, "task:echo,group:*", r.Scope())
	}
}
