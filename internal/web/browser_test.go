package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

var screenshots = flag.String("screenshots", "", "directory to write the dashboard's screenshots to (the README's come from ../../docs/img)")

// browserTimeout bounds each step in the browser.
const browserTimeout = 30 * time.Second

// dev is a running fairway dev: its dashboard link, its tokens, a client.
type dev struct {
	link, url  string
	natsURL    string
	adminToken string
	readToken  string
	client     *events.Client
}

// startDev runs fairway dev, as a user would, and waits for its banner.
func startDev(t *testing.T) *dev {
	t.Helper()
	// PostgreSQL runs as the unprivileged postgres user when the tests run
	// as root: the directory must be reachable for it.
	dir := devtest.Dir(t, "fairway-web-")
	natsPort, webPort := devtest.FreePort(t), devtest.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &devtest.Output{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, nil, []string{"dev", "--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
			"--pg-port", fmt.Sprint(devtest.FreePort(t)), "--http-addr", "", "--web-addr", fmt.Sprintf("127.0.0.1:%d", webPort),
			"--log-format", "json", "--retry-delay", "100ms"}, &bytes.Buffer{}, out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("fairway dev did not stop")
		}
	})
	link := regexp.MustCompile(`http://127\.0\.0\.1:\d+/#token=[0-9a-f]+`)
	select {
	case <-out.Seen("Fairway is running"):
	case code := <-done:
		t.Fatalf("fairway dev exited with %d:\n%s", code, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("fairway dev did not start:\n%s", out)
	}
	d := &dev{link: link.FindString(out.String()), url: fmt.Sprintf("http://127.0.0.1:%d/", webPort)}
	require.NotEmpty(t, d.link, "the banner prints the dashboard's link:\n%s", out)
	for to, f := range map[*string]string{&d.adminToken: "web-admin.token", &d.readToken: "web-read.token"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		*to = strings.TrimSpace(string(b))
	}
	d.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	nc, err := nats.Connect(d.natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	d.client, err = events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	return d
}

// get asks the HTTP API with the admin token.
func (d *dev) get(t *testing.T, path string, out any) {
	t.Helper()
	req, err := http.NewRequest("GET", d.url+strings.TrimPrefix(path, "/"), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.adminToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, path)
	require.NoError(t, json.NewDecoder(res.Body).Decode(out))
}

// state waits until a job is in the wanted state.
func (d *dev) state(t *testing.T, group, id string, want fairway.State) {
	t.Helper()
	d.job(t, group, id, string(want), func(j *fairway.Job) bool { return j.State == want })
}

// job waits until a job is as ok wants it (what says how).
func (d *dev) job(t *testing.T, group, id, what string, ok func(*fairway.Job) bool) {
	t.Helper()
	deadline := time.Now().Add(browserTimeout)
	for {
		job, err := d.client.Get(t.Context(), group, id)
		require.NoError(t, err)
		if ok(job) {
			return
		}
		require.True(t, time.Now().Before(deadline), "job %s is not %s: %s, attempt %d, progress %d", id, what, job.State, job.Attempt, job.Progress)
		time.Sleep(50 * time.Millisecond)
	}
}

// browser starts a headless Chromium of the distribution (apt-get install
// chromium) in a profile of its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	require.NotEmpty(t, path, "the dashboard's tests need Chromium: apt-get install chromium (.ci/run installs it)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1360, 900),
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it lives as long as ctx.
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`true`))
	require.NoError(t, err)
	return ctx
}

// do runs browser steps within browserTimeout.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// until waits until a JavaScript expression is true in the page.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(browserTimeout)
	for !eval[bool](t, ctx, expr) {
		require.True(t, time.Now().Before(deadline), "%s: %s is not true within %s", what, expr, browserTimeout)
		time.Sleep(50 * time.Millisecond)
	}
}

// open shows a view (a same-document navigation, as a click on a link)
// and waits until it has drawn.
func open(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	eval[string](t, ctx, fmt.Sprintf(`location.hash = %q`, hash))
	until(t, ctx, "open "+hash, fmt.Sprintf(`document.querySelector("#view").dataset.ready === %q`, hash))
}

// click clicks the element selector names, as a user's mouse would. A
// view that draws again between the look-up and the click (a live
// refresh) replaces the node: the click then looks it up again, as a user
// would click the new one.
func click(t *testing.T, ctx context.Context, selector string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, browserTimeout)
		err := chromedp.Do(cctx, chromedp.Click(chromedp.CSS(selector)))
		cancel()
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "Could not find node with given id") {
			require.NoError(t, err, "click "+selector)
			return
		}
	}
}

// shoot writes a picture of the whole page, with -screenshots.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shootWith(t, ctx, name, chromedp.FullScreenshot(100)) // 100: PNG
}

// shootElement writes a picture of the element selector matches.
func shootElement(t *testing.T, ctx context.Context, name, selector string) {
	t.Helper()
	shootWith(t, ctx, name, chromedp.Screenshot(chromedp.CSS(selector)))
}

func shootWith(t *testing.T, ctx context.Context, name string, take chromedp.Action[[]byte]) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	eval[bool](t, ctx, `(document.getElementById("toast").hidden = true)`) // a passing notice is no part of the picture
	ctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, take)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(*screenshots, name), png, 0o644))
}

func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	return eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, selector))
}

func text(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	return eval[string](t, ctx, fmt.Sprintf(`(document.querySelector(%q) || {textContent: %q}).textContent.trim()`, selector, "(no "+selector+")"))
}

// TestDashboardInABrowser drives the dashboard of a real fairway dev in
// headless Chromium as an operator would: the printed link logs in; every
// view draws, with numbers that match the API; a job's page shows its
// timeline, and cancel, retry and a bulk cancel change the jobs; a job
// submitted meanwhile appears without a reload; the read-only role sees no
// args and has no working buttons. With -screenshots DIR it writes the
// README's pictures.
func TestDashboardInABrowser(t *testing.T) {
	d := startDev(t)
	ctx := t.Context()

	// Work for three tenants: quick jobs, a few slow ones, one that fails
	// for good, and some delayed ones to cancel.
	final := map[string]fairway.State{}
	var finalMu sync.Mutex
	sub, err := d.client.Subscribe(ctx, events.Filter{Since: time.Unix(0, 0)}, func(ev events.Event) {
		if ev.State.Final() {
			finalMu.Lock()
			final[ev.JobID] = ev.State
			finalMu.Unlock()
		}
	})
	require.NoError(t, err)
	defer sub.Stop()
	submit := func(group, task, args string, edit func(*fairway.Submission)) string {
		s := fairway.Submission{Group: group, Task: task, Args: []byte(args), Subject: task + " for " + group}
		if edit != nil {
			edit(&s)
		}
		job, err := d.client.SubmitWait(ctx, s)
		require.NoError(t, err)
		return job.ID
	}
	var quick []string
	for i := range 12 {
		quick = append(quick, submit([]string{"acme", "globex", "initech"}[i%3], "echo", fmt.Sprintf(`{"invoice": %d}`, i), nil))
	}
	for _, g := range []string{"acme", "globex"} {
		quick = append(quick, submit(g, "sleep", `{"seconds": 0.5}`, nil))
	}
	failed := submit("globex", "fail", `{"times": 9}`, func(s *fairway.Submission) { s.MaxRetries = new(int) })
	later := time.Now().Add(time.Hour)
	var delayed []string
	for range 3 {
		delayed = append(delayed, submit("initech", "echo", `{"report": "nightly"}`, func(s *fairway.Submission) { s.RunAt = &later }))
	}
	held := submit("acme", "echo", `{"held": true}`, func(s *fairway.Submission) { s.Pending = true })
	waitFinal := func(ids ...string) {
		deadline := time.Now().Add(browserTimeout)
		for _, id := range ids {
			for {
				finalMu.Lock()
				_, ok := final[id]
				finalMu.Unlock()
				if ok {
					break
				}
				require.True(t, time.Now().Before(deadline), "job %s did not end", id)
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	waitFinal(append(quick, failed)...)

	b := browser(t)

	// The printed link logs in as admin and lands on the overview, whose
	// figures are the API's.
	do(t, b, "log in through the printed link", chromedp.Navigate(d.link))
	until(t, b, "the overview", `document.querySelector("#view").dataset.ready === "#/overview"`)
	require.NotContains(t, eval[string](t, b, `location.href`), "token", "the token leaves the address bar")
	eval[bool](t, b, `(window.confirm = () => true, true)`) // "Cancel 3 jobs?": yes
	require.Equal(t, "admin", text(t, b, "#who"))
	var st fairway.Stats
	d.get(t, "/api/stats?window=1h", &st)
	finished := int64(0)
	for _, f := range st.Finished {
		finished += f.Jobs
	}
	require.Equal(t, int64(len(quick)+1), finished)
	require.Equal(t, fmt.Sprint(finished), text(t, b, "#t-processed .n"))
	require.Equal(t, "1", text(t, b, "#t-failed .n"))
	require.Equal(t, len(st.Tasks), count(t, b, "#task-table tbody tr"))
	require.Positive(t, count(t, b, "svg.chart rect"), "the chart has bars")
	// The partitions, as the API has them.
	var parts struct {
		Partitions []fairway.Partition `json:"partitions"`
	}
	d.get(t, "/api/partitions", &parts)
	require.Len(t, parts.Partitions, 1)
	require.NotEmpty(t, parts.Partitions[0].Leader)
	require.Equal(t, 1, count(t, b, "#partition-table tbody tr"))
	require.Equal(t, parts.Partitions[0].Leader, text(t, b, `#partition-table tr[data-partition="0"] td:nth-child(2)`))
	require.Equal(t, parts.Partitions[0].Database, text(t, b, `#partition-table tr[data-partition="0"] td:nth-child(5)`))
	until(t, b, "the live stream", `document.querySelector("#live").classList.contains("on")`)
	shoot(t, b, "overview.png")

	// Fairness: a row per tenant, as the API has them.
	open(t, b, "#/fairness")
	var groups struct {
		Groups []struct{ Group string } `json:"groups"`
	}
	d.get(t, "/api/groups?window=1h", &groups)
	require.Len(t, groups.Groups, 3)
	require.Equal(t, 3, count(t, b, "#group-table tbody tr"))
	shoot(t, b, "fairness.png")

	// Jobs: all of them on one page; a filter by state finds the failed one.
	open(t, b, "#/jobs")
	var page struct {
		Jobs []fairway.Job `json:"jobs"`
	}
	d.get(t, "/api/jobs?limit=50", &page)
	require.Equal(t, len(page.Jobs), count(t, b, "#job-table tbody tr"))
	require.Equal(t, len(quick)+1+len(delayed)+1, len(page.Jobs))
	open(t, b, "#/jobs?state=failed")
	require.Equal(t, 1, count(t, b, "#job-table tbody tr"))

	// Live: a job submitted now shows up without a reload.
	open(t, b, "#/jobs?group=acme")
	fresh := submit("acme", "echo", `{"fresh": true}`, nil)
	until(t, b, "the new job appears", `document.querySelector('#job-table tr[data-id="`+fresh+`"]') !== null`)

	// A job's page: its timeline from the events, its args and result.
	open(t, b, "#/job/acme/"+quick[0])
	require.Equal(t, 4, count(t, b, "#timeline li"), "waiting, scheduled, running, success")
	require.Contains(t, text(t, b, "#job-args"), `"invoice": 0`)
	require.Contains(t, text(t, b, "#job-result"), `"invoice": 0`)
	shoot(t, b, "job.png")

	// Retry the failed job: it runs again (and fails again: attempt 2).
	open(t, b, "#/job/globex/"+failed)
	require.Contains(t, text(t, b, "#attempts"), "failed")
	click(t, b, "#job-retry")
	deadline := time.Now().Add(browserTimeout)
	for {
		job, err := d.client.Get(ctx, "globex", failed)
		require.NoError(t, err)
		if job.Attempt == 2 && job.State == fairway.StateFailed {
			break
		}
		require.True(t, time.Now().Before(deadline), "the retried job did not run again: %s, attempt %d", job.State, job.Attempt)
		time.Sleep(50 * time.Millisecond)
	}

	// Cancel the held job from its page.
	open(t, b, "#/job/acme/"+held)
	click(t, b, "#job-cancel")
	d.state(t, "acme", held, fairway.StateCancelled)

	// Bulk: cancel every job the filter matches (the three delayed ones).
	open(t, b, "#/jobs?group=initech&state=waiting")
	require.Equal(t, 3, count(t, b, "#job-table tbody tr"))
	shoot(t, b, "jobs.png")
	click(t, b, "#bulk-cancel")
	until(t, b, "the bulk result", `document.querySelector("#bulk-result").textContent.includes("3 of 3 changed")`)
	for _, id := range delayed {
		d.state(t, "initech", id, fairway.StateCancelled)
	}

	// Executors and periodic tasks.
	open(t, b, "#/executors")
	require.Equal(t, 1, count(t, b, "#executor-table tbody tr"))
	_, err = d.client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "nightly", Enabled: true, Task: "echo", Group: "acme", Timer: "*-*-* 02:00"})
	require.NoError(t, err)
	_, err = d.client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "standup", Enabled: true, Task: "echo", Group: "acme", Timer: "Mon..Fri *-*-* 09:30 America/New_York"})
	require.NoError(t, err)
	// A cron expression, in a zone (issue 32): shown as written, its runs
	// in its zone.
	_, err = d.client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "cron-standup", Enabled: true, Task: "echo", Group: "acme", Timer: "CRON_TZ=Europe/Berlin 15 6 * * 1-5"})
	require.NoError(t, err)
	open(t, b, "#/periodic")
	require.Equal(t, 5, count(t, b, `#periodic-table tr[data-id="nightly"] li`), "the next five runs")
	// Each run says its zone (issue 22): the timer's, UTC unless it names one.
	runs := func(id string) []string {
		return eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll('#periodic-table tr[data-id=%q] li')].map((li) => li.textContent)`, id))
	}
	for _, run := range runs("nightly") {
		require.Regexp(t, `\b02:00:00 UTC$`, run)
	}
	standup := runs("standup")
	require.Len(t, standup, 5)
	for _, run := range standup {
		require.Regexp(t, `\b09:30:00 America/New_York$`, run)
	}
	cronRuns := runs("cron-standup")
	require.Len(t, cronRuns, 5)
	for _, run := range cronRuns {
		require.Regexp(t, `\b06:15:00 Europe/Berlin$`, run)
	}
	require.Contains(t, text(t, b, `#periodic-table tr[data-id="cron-standup"]`), "CRON_TZ=Europe/Berlin 15 6 * * 1-5", "the expression as written")
	var periodic struct {
		Periodic []struct {
			ID       string      `json:"id"`
			Zone     string      `json:"zone"`
			NextRuns []time.Time `json:"next_runs"`
		} `json:"periodic"`
	}
	d.get(t, "/api/periodic", &periodic)
	zones := map[string]string{}
	for _, p := range periodic.Periodic {
		zones[p.ID] = p.Zone
		for _, run := range p.NextRuns {
			require.Equal(t, map[string]string{"nightly": "02:00", "standup": "09:30", "cron-standup": "06:15"}[p.ID], run.Format("15:04"), "%s: the API's times are in the timer's zone", p.ID)
		}
	}
	require.Equal(t, map[string]string{"nightly": "UTC", "standup": "America/New_York", "cron-standup": "Europe/Berlin"}, zones)

	// Limits: the form refuses a negative max next to the field; a limit
	// of two sleeps at once holds the other two of four back, the table
	// says so, live; removed, the limit is gone.
	open(t, b, "#/limits")
	require.Zero(t, count(t, b, "#limit-table"))
	require.Contains(t, text(t, b, "#limit-note"), "at once")
	setLimit := func(kind, name, max string) {
		t.Helper()
		eval[bool](t, b, fmt.Sprintf(`(() => {
			const f = document.querySelector("#limit-form");
			for (const [k, v] of [["kind", %q], ["name", %q], ["max", %q]]) {
				f.elements[k].value = v;
				f.elements[k].dispatchEvent(new Event(k === "kind" ? "change" : "input", { bubbles: true }));
			}
			return true;
		})()`, kind, name, max))
		click(t, b, `#limit-form button[type="submit"]`)
	}
	setLimit("task", "sleep", "-1")
	until(t, b, "the refusal, naming its field", `document.querySelector("#limit-error").textContent.startsWith("max: ")`)
	require.Equal(t, "true", eval[string](t, b, `document.querySelector('#limit-form input[name="max"]').getAttribute("aria-invalid")`))
	require.Zero(t, count(t, b, "#limit-table"))
	setLimit("task", "sleep", "2")
	row := `#limit-table tr[data-kind="task"][data-name="sleep"]`
	until(t, b, "the new limit's row", `document.querySelector('`+row+`') !== null`)
	require.Equal(t, "2", text(t, b, row+" td.max"))
	require.Equal(t, "0", text(t, b, row+" td.held"))
	require.Empty(t, text(t, b, "#limit-error"), "a limit set clears the refusal")
	setLimit("group", "*", "20")
	until(t, b, "the default group limit's row", `document.querySelector('#limit-table tr[data-kind="group"][data-name="*"]') !== null`)
	_, err = d.client.SetLimit(ctx, "group", "initech", 5)
	require.NoError(t, err)
	var sleeps []string
	for range 4 {
		sleeps = append(sleeps, submit("acme", "sleep", `{"seconds": 60}`, nil))
	}
	until(t, b, "two held, live", `document.querySelector('`+row+` td.held').textContent === "2" && document.querySelector('`+row+`.at-limit') !== null`)
	until(t, b, "three rows", `document.querySelectorAll("#limit-table tbody tr").length === 3`)
	limits, err := d.client.Limits(ctx)
	require.NoError(t, err)
	for _, l := range limits {
		if l.Kind == "task" {
			require.Equal(t, 2, l.Held, "the API agrees")
		}
	}
	var waiting struct {
		Jobs []fairway.Job `json:"jobs"`
	}
	d.get(t, "/api/jobs?task=sleep&state=waiting", &waiting)
	require.Len(t, waiting.Jobs, 2, "held back by the limit")
	shoot(t, b, "limits.png")
	click(t, b, row+" button.danger")
	until(t, b, "the row is gone", `document.querySelector('`+row+`') === null`)
	limits, err = d.client.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, limits, 2, "group * and initech are left")
	for _, id := range sleeps {
		_, err := d.client.Cancel(ctx, "acme", id)
		require.NoError(t, err)
	}

	// The dark theme, and the overview again for the picture.
	click(t, b, "#theme")
	require.Equal(t, "dark", eval[string](t, b, `document.documentElement.dataset.theme`))
	open(t, b, "#/overview")
	shoot(t, b, "overview-dark.png")

	// The read-only role: no args, no working buttons, no args search.
	r := browser(t)
	do(t, r, "log in read-only", chromedp.Navigate(d.url+"#token="+d.readToken))
	until(t, r, "the overview", `document.querySelector("#view").dataset.ready === "#/overview"`)
	require.Equal(t, "read-only", text(t, r, "#who"))
	open(t, r, "#/job/acme/"+quick[0])
	require.Zero(t, count(t, r, "#job-args"))
	require.True(t, eval[bool](t, r, `document.querySelector("#job-cancel").disabled && document.querySelector("#job-retry").disabled`))
	open(t, r, "#/jobs")
	require.Zero(t, count(t, r, `#job-filters input[name="text"]`))
	require.True(t, eval[bool](t, r, `document.querySelector("#bulk-cancel").disabled`))
	open(t, r, "#/limits")
	require.Equal(t, 2, count(t, r, "#limit-table tbody tr"))
	require.Zero(t, count(t, r, "#limit-form"), "no form to set one")
	require.Zero(t, count(t, r, "#limit-table button"), "no remove buttons")
}

// TestJobGraphInABrowser: a workflow that fans in, out and in again, with
// a delayed job and a failing branch; the page of its middle job draws the
// whole graph (a box per job, an arrow per dependency, the job outlined,
// the blocked and cancelled jobs saying so), and a click on a box opens
// that job, whose graph is its own. A job on its own has no such panel,
// and nothing (not "null") in its place.
func TestJobGraphInABrowser(t *testing.T) {
	d := startDev(t)
	ctx := t.Context()
	job := func(ref, task, args string, deps ...string) fairway.WorkflowJob {
		return fairway.WorkflowJob{Ref: ref, Submission: fairway.Submission{Task: task, Args: []byte(args), DependsOn: deps, Subject: strings.ReplaceAll(ref, "-", " ")}}
	}
	later := time.Now().Add(time.Hour)
	delayed := job("render", "echo", `{}`, "merge") // due in an hour: mail waits for it
	delayed.RunAt = &later
	ids, err := d.client.SubmitWorkflow(ctx, "acme", fairway.Workflow{Jobs: []fairway.WorkflowJob{
		job("fetch-orders", "echo", `{}`), job("fetch-prices", "echo", `{}`),
		job("merge", "echo", `{}`, "fetch-orders", "fetch-prices"),
		job("parse", "echo", `{}`, "merge"), delayed, job("check", "fail", `{"permanent": true}`, "merge"),
		job("mail", "echo", `{}`, "parse", "render"), job("notify", "echo", `{}`, "check"),
	}})
	require.NoError(t, err)
	d.state(t, "acme", ids["parse"], fairway.StateSuccess)
	d.state(t, "acme", ids["check"], fairway.StateFailed)
	d.state(t, "acme", ids["notify"], fairway.StateCancelled)
	d.state(t, "acme", ids["mail"], fairway.StatePending)
	alone, err := d.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo"})
	require.NoError(t, err)

	b := browser(t)
	do(t, b, "log in", chromedp.Navigate(d.link))
	until(t, b, "the overview", `document.querySelector("#view").dataset.ready === "#/overview"`)
	open(t, b, "#/job/acme/"+alone.ID)
	require.Zero(t, count(t, b, "#dependencies"), "a job on its own has no graph")
	// Nor a "null" where the panel would be (issue 22): between the
	// Timeline and Attempts cards, or anywhere on the page.
	require.Empty(t, eval[[]string](t, b, `[...document.querySelector("#view").childNodes].filter((n) => n.nodeType !== Node.ELEMENT_NODE).map((n) => n.textContent)`),
		"the job's page holds elements only")
	require.NotRegexp(t, `\bnull\b`, eval[string](t, b, `document.querySelector("#view").innerText`))

	node := func(ref string) string { return `#graph-svg g.node[data-id="` + ids[ref] + `"]` }
	open(t, b, "#/job/acme/"+ids["merge"])
	require.Equal(t, 8, count(t, b, "#graph-svg g.node"), "every job of the workflow: merge's ancestors and descendants")
	require.Equal(t, 8, count(t, b, "#graph-svg path.edge"))
	for _, e := range [][2]string{{"fetch-orders", "merge"}, {"merge", "check"}, {"render", "mail"}, {"check", "notify"}} {
		require.Equal(t, 1, count(t, b, `#graph-svg path.edge[data-from="`+ids[e[0]]+`"][data-to="`+ids[e[1]]+`"]`), "%s → %s", e[0], e[1])
	}
	require.Equal(t, 1, count(t, b, "#graph-svg g.node.current"))
	require.Equal(t, 1, count(t, b, node("merge")+".current"), "the job of the page is outlined")
	require.Equal(t, 1, count(t, b, node("notify")+".cancelled"))
	require.Contains(t, text(t, b, node("notify")+" text.sub"), "cancelled")
	require.Equal(t, 1, count(t, b, node("check")+".failed"))
	require.Contains(t, text(t, b, node("mail")+" text.sub"), "pending")
	require.Contains(t, text(t, b, `#graph-list li[data-id="`+ids["mail"]+`"]`), "waits for "+ids["render"])
	require.Contains(t, text(t, b, `#graph-list li[data-id="`+ids["notify"]+`"]`), "dependency "+ids["check"]+" failed")
	// Left to right by layer: the fetches, merge, its three dependents, then mail.
	x := func(ref string) float64 {
		return eval[float64](t, b, `document.querySelector('`+node(ref)+` rect:not(.halo)').x.baseVal.value`)
	}
	require.Less(t, x("fetch-orders"), x("merge"))
	require.Less(t, x("merge"), x("render"))
	require.Equal(t, x("parse"), x("check"))
	require.Less(t, x("render"), x("mail"))
	shootElement(t, b, "graph.png", "#dependencies")

	click(t, b, node("parse"))
	until(t, b, "the clicked job's page", `document.querySelector("#view").dataset.ready === "#/job/acme/`+ids["parse"]+`"`)
	require.Contains(t, text(t, b, "#job-title"), ids["parse"])
	require.Equal(t, 5, count(t, b, "#graph-svg g.node"), "parse, its ancestors and mail (not its siblings)")
	require.Equal(t, 4, count(t, b, "#graph-svg path.edge"))
	require.Equal(t, 1, count(t, b, node("parse")+".current"))
}

// TestRetriedJobAndLeftExecutorInABrowser (issue 22): a job run again
// shows the attempt it runs, not the previous one's progress and error,
// whether it was retried by itself (stuck) or by hand (failed); the
// attempts table keeps each attempt's error. An executor that has left has
// no Drain button, and a drain of one that left after the view was drawn
// shows the coordinators' refusal and draws the view again.
func TestRetriedJobAndLeftExecutorInABrowser(t *testing.T) {
	d := startDev(t)
	ctx := t.Context()

	// An executor of the test's own, whose task does as it is told: report
	// a progress, or end its attempt with an error (or none).
	type order struct {
		progress int
		end      bool
		err      error
	}
	orders := make(chan order)
	nc, err := nats.Connect(d.natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ex, err := executor.New(nc, executor.Config{AppID: "obedient", PoolSize: 1, Heartbeat: time.Second})
	require.NoError(t, err)
	ex.Handle("obey", func(ctx context.Context, job *executor.Job) error {
		for {
			select {
			case o := <-orders:
				if o.end {
					return o.err
				}
				job.SetProgress(o.progress)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	require.NoError(t, ex.Start(ctx))
	t.Cleanup(ex.Stop)
	tell := func(o order) {
		select {
		case orders <- o:
		case <-time.After(browserTimeout):
			t.Fatal("the task did not take its order")
		}
	}

	retries := 3
	job, err := d.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "obey", MaxRetries: &retries})
	require.NoError(t, err)
	running := func(attempt int) func(*fairway.Job) bool {
		return func(j *fairway.Job) bool { return j.State == fairway.StateRunning && j.Attempt == attempt }
	}
	d.job(t, "acme", job.ID, "running", running(1))
	tell(order{progress: 60})
	d.job(t, "acme", job.ID, "at 60%", func(j *fairway.Job) bool { return j.Progress == 60 })
	tell(order{end: true, err: errors.New("disk full")})
	d.job(t, "acme", job.ID, "running its second attempt", running(2))

	b := browser(t)
	do(t, b, "log in", chromedp.Navigate(d.link))
	until(t, b, "the overview", `document.querySelector("#view").dataset.ready === "#/overview"`)
	eval[bool](t, b, `(window.confirm = () => true, true)`)
	page := "#/job/acme/" + job.ID
	field := func(name string) string {
		return eval[string](t, b, fmt.Sprintf(`[...document.querySelectorAll("#view dl.kv dt")].find((dt) => dt.textContent === %q).nextElementSibling.textContent`, name))
	}
	progress := func() string {
		return eval[string](t, b, `document.querySelector("#view dl.kv .progress > div").style.width`)
	}
	attemptErrors := func(want ...string) {
		t.Helper()
		js, _ := json.Marshal(want)
		until(t, b, "the attempts and their errors", `JSON.stringify([...document.querySelectorAll("#attempts tbody tr")].map((tr) => tr.lastElementChild.textContent)) === `+"`"+string(js)+"`")
	}
	open(t, b, page)
	require.Equal(t, "running", field("state"))
	require.Equal(t, "0%", progress(), "attempt 2 has reported no progress")
	require.Empty(t, field("error"), "attempt 2 has no error")
	require.NotContains(t, eval[string](t, b, `document.querySelector("#view dl.kv").innerText`), "disk full")
	j, err := d.client.Get(ctx, "acme", job.ID)
	require.NoError(t, err)
	require.Zero(t, j.Progress, "the API")
	require.Empty(t, j.Error, "the API")
	// The first attempt's error is in its events: its row of attempts.
	attemptErrors("disk full", "")

	// The second attempt fails for good; retried by hand, the third starts
	// afresh too.
	tell(order{progress: 30})
	d.job(t, "acme", job.ID, "at 30%", func(j *fairway.Job) bool { return j.Progress == 30 })
	tell(order{end: true, err: fairway.Permanent(errors.New("bad input"))})
	d.state(t, "acme", job.ID, fairway.StateFailed)
	open(t, b, "#/overview")
	open(t, b, page)
	require.Equal(t, "bad input", field("error"), "a failed job shows its error")
	click(t, b, "#job-retry")
	d.job(t, "acme", job.ID, "running its third attempt", running(3))
	open(t, b, "#/overview")
	open(t, b, page)
	attemptErrors("disk full", "bad input", "")
	require.Equal(t, "running", field("state"))
	require.Equal(t, "0%", progress(), "attempt 3 has reported no progress")
	require.Empty(t, field("error"), "attempt 3 has no error")
	tell(order{end: true})
	d.state(t, "acme", job.ID, fairway.StateSuccess)

	// Executors: both live, both with a Drain button. The test's own
	// leaves (it deregisters) while the view shows it: its drain is
	// refused, said so, and the view drawn again has no button for it.
	// The live stream is closed first, and a redraw it scheduled (the
	// job's last events) waited for: a redraw between the executor's
	// leaving and the click would take the button away (CI saw it once).
	require.True(t, eval[bool](t, b, `(state.live && state.live.close(), true)`))
	until(t, b, "no redraw pending", `!state.pending`)
	open(t, b, "#/executors")
	mine := `#executor-table tr[data-app="obedient"]`
	require.Equal(t, 2, count(t, b, "#executor-table tbody tr button"))
	require.Equal(t, 1, count(t, b, mine+" button"))
	stop, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	require.NoError(t, ex.Shutdown(stop))
	click(t, b, mine+" button")
	until(t, b, "the refusal", `document.querySelector("#toast").textContent.includes("is deregistered: nothing to drain")`)
	require.True(t, eval[bool](t, b, `document.querySelector("#toast").classList.contains("bad")`))
	until(t, b, "the view drawn again", `document.querySelector('`+mine+` td:nth-child(3)').textContent === "deregistered"`)
	require.Zero(t, count(t, b, mine+" button"), "no Drain button for an executor that has left")
	require.Contains(t, text(t, b, mine+" td:last-child"), "left")
	require.Equal(t, 1, count(t, b, "#executor-table tbody tr button"), "the live one keeps its button")
	open(t, b, "#/overview")
	open(t, b, "#/executors")
	require.Zero(t, count(t, b, mine+" button"))
}
