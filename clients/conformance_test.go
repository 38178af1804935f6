package clients_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// submit submits one job and returns its id.
func submit(t *testing.T, c *events.Client, sub fairway.Submission) string {
	t.Helper()
	if sub.ID == "" {
		sub.ID = sub.Task + "-" + fairway.NewID()
	}
	id, err := c.Submit(t.Context(), sub)
	require.NoError(t, err)
	return id
}

// final waits for the job to end and returns it.
func final(t *testing.T, c *events.Client, group, id string) *fairway.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	job, err := c.Wait(ctx, group, id)
	require.NoError(t, err, "waiting for job %s", id)
	return job
}

// until polls the job until cond holds, and returns it then.
func until(t *testing.T, c *events.Client, group, id, what string, cond func(*fairway.Job) bool) *fairway.Job {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		job, err := c.Get(t.Context(), group, id)
		if !errors.Is(err, fairway.ErrNotFound) { // submitted, not stored yet
			require.NoError(t, err)
			if cond(job) {
				return job
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not %s within %s: %+v", id, what, waitTimeout, job)
		}
		time.Sleep(50 * time.Millisecond) // a poll of state (within the group's API quota); no event says "running on this instance"
	}
}

func running(j *fairway.Job) bool { return j.State == fairway.StateRunning }

// conformance runs the suite's checks against one executor on the dev
// without authentication. The languages run one after the other: they
// register the same tasks.
func conformance(t *testing.T, d *dev, p executorProgram) {
	c, nc := d.client(t, "")
	group, appID := "conf-"+p.lang, "conf-"+p.lang
	ex := p.start(t, "--nats-url", d.NATSURL, "--app-id", appID, "--slots", "4")

	t.Run("registration", func(t *testing.T) {
		list, err := c.Executors(t.Context())
		require.NoError(t, err)
		i := slices.IndexFunc(list, func(e fairway.Executor) bool { return e.AppID == appID && e.Instance == ex.instance })
		require.GreaterOrEqual(t, i, 0, "instance %s of %s in %+v", ex.instance, appID, list)
		require.Equal(t, 4, list[i].Slots)
		require.ElementsMatch(t, []string{"conf-echo", "conf-sleep", "conf-fail", "conf-snooze", "conf-big", "conf-trace", "conf-one"}, list[i].Tasks)
	})

	t.Run("result-logs-progress", func(t *testing.T) {
		args := `{"n":1,"text":"héllo","list":[1,2,{"a":null}]}`
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-echo", Args: json.RawMessage(args)})
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateSuccess, job.State, "%+v", job)
		require.JSONEq(t, args, string(job.Result))
		require.Equal(t, appID, job.Executor)
		require.Equal(t, 100, job.Progress)
		logs, err := c.Logs(t.Context(), group, id)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(logs, func(l fairway.LogLine) bool {
			return l.Level == "info" && l.Message == "echo attempt 1" && l.Attempt == 1
		}), "the handler's log line in %+v", logs)
	})

	t.Run("errors-and-retries", func(t *testing.T) {
		retried := submit(t, c, fairway.Submission{Group: group, Task: "conf-fail", MaxRetries: new(1),
			Args: json.RawMessage(`{"message":"boom: disk full"}`)})
		permanent := submit(t, c, fairway.Submission{Group: group, Task: "conf-fail", MaxRetries: new(3),
			Args: json.RawMessage(`{"message":"bad input","permanent":true}`)})
		job := final(t, c, group, retried)
		require.Equal(t, fairway.StateFailed, job.State)
		require.Equal(t, 2, job.Attempt, "retried once: %+v", job)
		require.Contains(t, job.Error, "boom: disk full")
		job = final(t, c, group, permanent)
		require.Equal(t, fairway.StateFailed, job.State)
		require.Equal(t, 1, job.Attempt, "a permanent error is not retried: %+v", job)
		require.Contains(t, job.Error, "bad input")

		before := time.Now()
		snoozed := submit(t, c, fairway.Submission{Group: group, Task: "conf-snooze", Args: json.RawMessage(`{"seconds":60}`)})
		job = until(t, c, group, snoozed, "snoozed", func(j *fairway.Job) bool {
			return j.State == fairway.StateWaiting && j.RunAt.After(before.Add(30*time.Second))
		})
		require.Equal(t, fairway.StateWaiting, job.State, "%+v", job)
		require.Zero(t, job.Retries, "a snooze counts no failure: %+v", job)
		require.True(t, job.RunAt.After(before.Add(50*time.Second)), "due a minute later: %+v", job)
		_, err := c.Cancel(t.Context(), group, snoozed)
		require.NoError(t, err)
	})

	t.Run("cancel", func(t *testing.T) {
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Args: json.RawMessage(`{"ms":600000}`)})
		until(t, c, group, id, "running", running)
		start := time.Now()
		_, err := c.Cancel(t.Context(), group, id)
		require.NoError(t, err)
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateCancelled, job.State, "%+v", job)
		require.Less(t, time.Since(start), time.Minute, "the handler was interrupted, not waited for")
	})

	t.Run("timeout", func(t *testing.T) {
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Timeout: "1s", MaxRetries: new(0),
			Args: json.RawMessage(`{"ms":600000}`)})
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateFailed, job.State, "%+v", job)
		require.True(t, strings.HasPrefix(job.Error, "timeout"), "error %q", job.Error)
		require.Less(t, job.Finished.Sub(*job.Started), 30*time.Second, "%+v", job)
	})

	t.Run("per-task-concurrency", func(t *testing.T) {
		var ids []string
		for range 3 {
			ids = append(ids, submit(t, c, fairway.Submission{Group: group, Task: "conf-one", Args: json.RawMessage(`{"ms":300}`)}))
		}
		jobs, err := c.WaitMany(t.Context(), group, ids)
		require.NoError(t, err)
		for i, a := range jobs {
			require.Equal(t, fairway.StateSuccess, a.State, "%+v", a)
			for _, b := range jobs[i+1:] {
				overlap := a.Started.Before(*b.Finished) && b.Started.Before(*a.Finished)
				require.False(t, overlap, "conf-one runs one at a time: %s ran %s–%s, %s ran %s–%s",
					a.ID, a.Started, a.Finished, b.ID, b.Started, b.Finished)
			}
		}
	})

	t.Run("prefetch-bound", func(t *testing.T) {
		// What the executor asks for, read on the dispatch subject: never
		// more than 2 × its 4 slots, nor "idle" beyond its slots.
		asked := make(chan events.DispatchRequest, 10000)
		sub, err := nc.Subscribe("fairway.exec."+appID+".dispatch", func(m *nats.Msg) {
			var req events.DispatchRequest
			if json.Unmarshal(m.Data, &req) == nil && !req.Stopping {
				select {
				case asked <- req:
				default:
				}
			}
		})
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, nc.Flush())

		subs := make([]fairway.Submission, 60)
		for i := range subs {
			subs[i] = fairway.Submission{Group: group, Task: "conf-sleep", ID: fmt.Sprintf("held-%d-%s", i, fairway.NewID()), Args: json.RawMessage(`{"ms":30}`)}
		}
		ids, err := c.SubmitMany(t.Context(), subs)
		require.NoError(t, err)
		// And what the coordinators see it hold (scheduled or running),
		// sampled until every job ended. Their view lags the executor's
		// by the reports on their way (a job ended and its slot taken
		// again before its report is stored counts twice): with 4 slots
		// of 30 ms jobs, each 30 ms of lag counts 4 more. A bound of
		// 3 × slots (12) failed on a loaded machine at 18, while the
		// Python worker logged no job beyond its slots and prefetch
		// (it releases one it gets, saying so); hence half the jobs:
		// an executor that took jobs beyond its slots and prefetch
		// would hold all 60.
		most := 0
		deadline := time.Now().Add(waitTimeout)
		for {
			jobs, err := c.List(t.Context(), events.ListRequest{Group: group, Task: "conf-sleep", Limit: 100})
			require.NoError(t, err)
			var held []string
			ended := 0
			for _, j := range jobs {
				switch j.State {
				case fairway.StateScheduled, fairway.StateRunning:
					held = append(held, fmt.Sprintf("%s %s attempt %d on %s", j.ID, j.State, j.Attempt, j.Executor))
				case fairway.StateSuccess:
					ended++
				}
			}
			most = max(most, len(held))
			require.LessOrEqual(t, len(held), 30, "jobs held by an executor of 4 slots:\n%s", strings.Join(held, "\n"))
			if ended >= len(ids) {
				break
			}
			require.True(t, time.Now().Before(deadline), "60 jobs of 30 ms not done within %s", waitTimeout)
			time.Sleep(25 * time.Millisecond) // a sample (within the group's API quota of 100 requests a second)
		}
		require.Positive(t, most)
		require.NoError(t, sub.Unsubscribe())
		require.NotEmpty(t, asked, "the executor's dispatch requests were seen")
		for len(asked) > 0 {
			req := <-asked
			require.LessOrEqual(t, req.Slots, 8, "a request of an executor of 4 slots: %+v", req)
			if req.Idle != nil {
				require.LessOrEqual(t, *req.Idle, 4, "%+v", req)
				require.LessOrEqual(t, *req.Idle, req.Slots, "%+v", req)
			}
		}
	})

	t.Run("reports-sent-again", func(t *testing.T) {
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		stream, err := js.Stream(t.Context(), "FAIRWAY_RESULTS")
		require.NoError(t, err)
		cfg := stream.CachedInfo().Config
		// Every publish to the executor's results subject, seen on core
		// NATS whether the stream takes it or not.
		published := make(chan string, 100)
		sub, err := nc.Subscribe("fairway.results."+appID, func(m *nats.Msg) { published <- string(m.Data) })
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, nc.Flush())

		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Args: json.RawMessage(`{"ms":1500}`)})
		until(t, c, group, id, "running", running)
		refusing := cfg
		refusing.MaxBytes = 1 // the stream full: every report refused, as when its share is
		_, err = js.UpdateStream(t.Context(), refusing)
		require.NoError(t, err)
		restored := false
		defer func() {
			if !restored {
				_, _ = js.UpdateStream(context.Background(), cfg)
			}
		}()
		doneReports := 0
		for doneReports < 2 { // its done report, refused, then sent again
			select {
			case body := <-published:
				if strings.Contains(body, id) && strings.Contains(body, `"done"`) {
					doneReports++
				}
			case <-time.After(waitTimeout):
				t.Fatalf("the done report of job %s was not sent again within %s", id, waitTimeout)
			}
		}
		job, err := c.Get(t.Context(), group, id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateRunning, job.State, "no report stored yet")
		_, err = js.UpdateStream(t.Context(), cfg)
		require.NoError(t, err)
		restored = true
		job = final(t, c, group, id)
		require.Equal(t, fairway.StateSuccess, job.State, "%+v", job)
	})

	t.Run("poison-result", func(t *testing.T) {
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-big", MaxRetries: new(3), Args: json.RawMessage(`{"bytes":2097152}`)})
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateFailed, job.State, "%+v", job)
		require.Equal(t, 1, job.Attempt, "a result over the limit is not retried")
		require.Contains(t, job.Error, "1 MiB")
		next := submit(t, c, fairway.Submission{Group: group, Task: "conf-echo", Args: json.RawMessage(`{"after":"big"}`)})
		require.Equal(t, fairway.StateSuccess, final(t, c, group, next).State, "the reports after it go on")
	})

	t.Run("tracing", func(t *testing.T) {
		const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		ctx := events.WithTraceParent(t.Context(), "00-"+traceID+"-00f067aa0ba902b7-01")
		id, err := c.Submit(ctx, fairway.Submission{Group: group, Task: "conf-trace", ID: "trace-" + fairway.NewID()})
		require.NoError(t, err)
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateSuccess, job.State, "%+v", job)
		var res struct {
			TraceParent string `json:"traceparent"`
		}
		require.NoError(t, json.Unmarshal(job.Result, &res))
		require.Regexp(t, `^00-`+traceID+`-[0-9a-f]{16}-0[01]$`, res.TraceParent, "the handler's trace context is the submitter's trace")
	})

	t.Run("pause-resume", func(t *testing.T) {
		require.NoError(t, c.Pause(t.Context(), events.PauseCommand{Executor: appID, Task: "conf-echo"}))
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-echo", Args: json.RawMessage(`{}`)})
		// Nothing to await for a job that must not run: a second's look.
		time.Sleep(time.Second)
		job, err := c.Get(t.Context(), group, id)
		require.NoError(t, err)
		// (Handed over once to a request that left before the pause came,
		// it is released at once: scheduled, then waiting again.)
		require.Contains(t, []fairway.State{fairway.StateWaiting, fairway.StateScheduled}, job.State, "a paused task's job does not run: %+v", job)
		require.NoError(t, c.Pause(t.Context(), events.PauseCommand{Executor: appID, Task: "conf-echo", Resume: true}))
		require.Equal(t, fairway.StateSuccess, final(t, c, group, id).State)
	})

	t.Run("lease-enforced", func(t *testing.T) {
		// The executor frozen (SIGSTOP) while its job runs: no heartbeat,
		// no report. The coordinators give the job back when its lease
		// runs out (10 s here), counted; once thawed, the executor's late
		// report of that attempt changes nothing, and it runs jobs again.
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Timeout: "1s", MaxRetries: new(0),
			Args: json.RawMessage(`{"ms":600000}`)})
		until(t, c, group, id, "running", running)
		ex.signal(t, syscall.SIGSTOP)
		thawed := false
		defer func() {
			if !thawed {
				_ = ex.Cmd.Process.Signal(syscall.SIGCONT)
			}
		}()
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateFailed, job.State, "%+v", job)
		require.Contains(t, job.Error, "executor lost", "given back by the coordinators: %+v", job)
		ex.signal(t, syscall.SIGCONT)
		thawed = true
		next := submit(t, c, fairway.Submission{Group: group, Task: "conf-echo", Args: json.RawMessage(`{"after":"thaw"}`)})
		require.Equal(t, fairway.StateSuccess, final(t, c, group, next).State, "the thawed executor runs jobs again")
		job, err := c.Get(t.Context(), group, id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateFailed, job.State, "the late report of an attempt given back changes nothing: %+v", job)
		require.Contains(t, job.Error, "executor lost", "%+v", job)
	})

	t.Run("graceful-stop", func(t *testing.T) {
		id := submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Args: json.RawMessage(`{"ms":2000}`)})
		until(t, c, group, id, "running", running)
		ex.signal(t, syscall.SIGTERM)
		require.Equal(t, 0, ex.Wait(t), "exit status after SIGTERM:\n%s", ex.Out)
		require.Contains(t, ex.Out.String(), "conformance: stopped")
		job := final(t, c, group, id)
		require.Equal(t, fairway.StateSuccess, job.State, "the running job finished: %+v", job)
		list, err := c.Executors(t.Context())
		require.NoError(t, err)
		i := slices.IndexFunc(list, func(e fairway.Executor) bool { return e.Instance == ex.instance })
		require.GreaterOrEqual(t, i, 0)
		require.Equal(t, fairway.ExecutorDeregistered, list[i].State)
	})

	t.Run("forced-stop-gives-attempts-back", func(t *testing.T) {
		ex2 := p.start(t, "--nats-url", d.NATSURL, "--app-id", appID, "--slots", "2")
		ids := []string{
			submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Args: json.RawMessage(`{"ms":600000}`)}),
			submit(t, c, fairway.Submission{Group: group, Task: "conf-sleep", Args: json.RawMessage(`{"ms":600000}`)}),
		}
		for _, id := range ids {
			until(t, c, group, id, "running", running)
		}
		ex2.signal(t, syscall.SIGINT)
		ex2.Out.Wait(t, "conformance: stopping", waitTimeout) // it took the first signal
		ex2.signal(t, syscall.SIGINT)
		require.Equal(t, 0, ex2.Wait(t), "exit status after two signals:\n%s", ex2.Out)
		for _, id := range ids {
			job := until(t, c, group, id, "released", func(j *fairway.Job) bool { return j.State == fairway.StateWaiting })
			require.Zero(t, job.Retries, "released, not failed: %+v", job)
		}
		ex3 := p.start(t, "--nats-url", d.NATSURL, "--app-id", appID, "--slots", "2")
		for _, id := range ids {
			job := until(t, c, group, id, "running again", running)
			require.Equal(t, 1, job.Attempt, "the next instance runs it as the attempt given back: %+v", job)
			require.Equal(t, appID, job.Executor)
			_, err := c.Cancel(t.Context(), group, id)
			require.NoError(t, err)
			require.Equal(t, fairway.StateCancelled, final(t, c, group, id).State)
		}

		// An operator's drain stops it as a signal does.
		require.NoError(t, c.Drain(t.Context(), appID))
		require.Equal(t, 0, ex3.Wait(t), "exit status after a drain:\n%s", ex3.Out)
		require.Contains(t, ex3.Out.String(), "conformance: stopped")
	})
}

// conformanceTenants checks an executor on the dev with isolated
// tenants: it logs in with its credential, is refused a task its
// credential does not grant, and runs its group's jobs only.
func conformanceTenants(t *testing.T, fairwayBin string, d *dev, p executorProgram) {
	appID := "conf-" + p.lang
	addExecutorCreds(t, fairwayBin, d, appID, "conf-echo")
	flags := []string{"--nats-url", d.NATSURL, "--creds", d.creds("executor-" + appID), "--app-id", appID}

	refused := p.launch(t, append(flags, "--tasks", "conf-echo,conf-fail")...)
	require.Equal(t, 2, refused.Wait(t), "a task the credential does not grant:\n%s", refused.Out)
	require.Regexp(t, `conformance: refused: \w+: .*conf-fail`, refused.Out.String())

	ex := p.start(t, append(flags, "--tasks", "conf-echo")...)
	acme, _ := d.client(t, "tenant-acme")
	globex, _ := d.client(t, "tenant-globex")
	theirs := submit(t, globex, fairway.Submission{Group: "globex", Task: "conf-echo", Args: json.RawMessage(`{"who":"globex"}`)})
	ours := submit(t, acme, fairway.Submission{Group: "acme", Task: "conf-echo", Args: json.RawMessage(`{"who":"acme"}`)})
	job := final(t, acme, "acme", ours)
	require.Equal(t, fairway.StateSuccess, job.State, "%+v", job)
	require.Equal(t, appID, job.Executor)
	require.JSONEq(t, `{"who":"acme"}`, string(job.Result))
	// The acme job ran after globex's was stored: had the executor been
	// handed globex's, it would have run it first.
	other, err := globex.Get(t.Context(), "globex", theirs)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, other.State, "another group's job is not handed to this executor: %+v", other)
	_, err = globex.Cancel(t.Context(), "globex", theirs)
	require.NoError(t, err)

	ex.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, ex.Wait(t), "exit status after SIGTERM:\n%s", ex.Out)
}
