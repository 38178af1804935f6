package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// start creates an executor on b's connection with handlers, starts it and
// stops it when the test ends.
func start(t *testing.T, b *bundle, cfg executor.Config, handlers map[string]executor.Handler) *executor.Executor {
	t.Helper()
	e := newExecutor(t, b, cfg, handlers)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, e.Start(ctx))
	return e
}

func newExecutor(t *testing.T, b *bundle, cfg executor.Config, handlers map[string]executor.Handler) *executor.Executor {
	t.Helper()
	if cfg.AppID == "" {
		cfg.AppID = "worker-1"
	}
	e, err := executor.New(b.execNC, cfg)
	require.NoError(t, err)
	for task, h := range handlers {
		e.Handle(task, h)
	}
	t.Cleanup(e.Stop)
	return e
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		var zero T
		return zero
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		cfg   executor.Config
		field string
	}{
		{executor.Config{}, "AppID"},
		{executor.Config{AppID: "a.b"}, "AppID"},
		{executor.Config{AppID: "w", PoolSize: -1}, "PoolSize"},
		{executor.Config{AppID: "w", LogBufferSize: -5}, "LogBufferSize"},
		{executor.Config{AppID: "w", Heartbeat: -time.Second}, "Heartbeat"},
		{executor.Config{AppID: "w", WakeupPeriod: -time.Second}, "WakeupPeriod"},
		{executor.Config{AppID: "w", Prefix: "fair way"}, "Prefix"},
	} {
		_, err := executor.New(b.execNC, tc.cfg)
		require.ErrorIs(t, err, fairway.ErrInvalid, "%+v", tc.cfg)
		var ferr *fairway.Error
		require.ErrorAs(t, err, &ferr)
		require.Equal(t, tc.field, ferr.Field, "%+v: %v", tc.cfg, err)
	}

	cfg := executor.Config{AppID: "w"}.WithDefaults()
	require.Equal(t, executor.PoolSizeDefault, cfg.PoolSize)
	require.Equal(t, executor.LogBufferSizeDefault, cfg.LogBufferSize)
	require.Equal(t, executor.HeartbeatDefault, cfg.Heartbeat)
	require.Equal(t, executor.WakeupPeriodDefault, cfg.WakeupPeriod)
	require.Equal(t, "fairway", cfg.Prefix)
	require.NotEmpty(t, cfg.Host)
	require.NotNil(t, cfg.Logger)
}

func TestHandlePanicsOnProgrammingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{}, nil)
	ok := func(context.Context, *executor.Job) error { return nil }
	require.PanicsWithValue(t, `executor.Handle: task: "a.b" contains '.': only letters, digits, '-' and '_' are allowed (it must be one NATS subject token)`,
		func() { e.Handle("a.b", ok) })
	require.Panics(t, func() { e.Handle("x", nil) })
	e.Handle("x", ok)
	require.PanicsWithValue(t, `executor.Handle: task "x" already has a handler`, func() { e.Handle("x", ok) })
}

func TestStartWithoutHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{}, nil)
	require.ErrorContains(t, e.Start(context.Background()), "no handlers")
}

func TestSuccessWithResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type args struct{ N int }
	gotCtxValue := make(chan any, 1)
	type ctxKey struct{}
	e := newExecutor(t, b, executor.Config{PoolSize: 2, Host: "box"}, map[string]executor.Handler{
		"double": func(ctx context.Context, job *executor.Job) error {
			gotCtxValue <- ctx.Value(ctxKey{})
			var a args
			if err := job.Bind(&a); err != nil {
				return err
			}
			job.SetProgress(10)
			job.SetProgress(150) // clamped to 100
			return job.SetResult(map[string]int{"double": 2 * a.N})
		},
		"noop": func(context.Context, *executor.Job) error { return nil },
	})
	job := newJob("double", `{"n": 21}`)
	b.coord.add(job)
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), waitTimeout)
	defer cancel()
	require.NoError(t, e.Start(ctx))

	reg := recv(t, b.coord.registers, "the registration")
	require.Equal(t, "worker-1", reg.Executor.AppID)
	require.NotEmpty(t, reg.Executor.Instance)
	require.Equal(t, "box", reg.Executor.Host)
	require.Equal(t, 2, reg.Executor.Slots)
	require.Equal(t, []string{"double", "noop"}, reg.Executor.Tasks)
	require.False(t, reg.Executor.Started.IsZero())

	req := b.coord.nextDispatch()
	require.NotEmpty(t, req.RequestID)
	idle := 2
	require.Equal(t, events.DispatchRequest{Executor: "worker-1", Instance: reg.Executor.Instance, Slots: 2, Idle: &idle, Tasks: []string{"double", "noop"}, WaitMS: 1000,
		RequestID: req.RequestID}, req, "a long poll of a second, its two slots free")

	reports := requireStarted(t, b.coord.reportsUntilDone(job.ID))
	done := reports[len(reports)-1]
	require.Equal(t, events.OutcomeSuccess, done.Outcome, "error: %s", done.Error)
	require.JSONEq(t, `{"double": 42}`, string(done.Result))
	require.Equal(t, "worker-1", done.Executor)
	require.Equal(t, 1, done.Attempt)
	require.Empty(t, done.Error)
	var progress []int
	for _, r := range reports {
		if r.Type == events.ReportProgress {
			progress = append(progress, r.Progress)
		}
	}
	require.NotEmpty(t, progress)
	require.Equal(t, 100, progress[len(progress)-1])
	require.Equal(t, "v", recv(t, gotCtxValue, "the handler's context value"), "handlers' contexts carry Start's values")

	// The ping command answers with the instance id.
	msg, err := b.coord.nc.Request(b.coord.subjects.Ping("worker-1"), nil, waitTimeout)
	require.NoError(t, err)
	require.Equal(t, reg.Executor.Instance, string(msg.Data))

	require.NoError(t, e.Shutdown(context.Background()))
	require.NoError(t, e.Shutdown(context.Background()), "safe to call twice")
	require.Equal(t, 0, e.Running())
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{PoolSize: 1}, map[string]executor.Handler{
		"fail": func(context.Context, *executor.Job) error { return errors.New("disk full") },
		"perm": func(context.Context, *executor.Job) error {
			return fmt.Errorf("checking input: %w", fairway.Permanent(errors.New("bad input")))
		},
		"panic": func(context.Context, *executor.Job) error { panic("kaboom") },
		"bind": func(_ context.Context, job *executor.Job) error {
			var v struct{ N int }
			return job.Bind(&v)
		},
		"ok": func(context.Context, *executor.Job) error { return nil },
	})
	fail, perm, panicking, bind, unknown, ok := newJob("fail", `{}`), newJob("perm", `{}`), newJob("panic", `{}`),
		newJob("bind", `{"n": "x"}`), newJob("nope", `{}`), newJob("ok", `{}`)
	b.coord.add(fail, perm, panicking, bind, unknown, ok)
	require.NoError(t, e.Start(context.Background()))

	done := b.coord.done(fail.ID)
	require.Equal(t, events.OutcomeError, done.Outcome)
	require.Equal(t, "disk full", done.Error)

	done = b.coord.done(perm.ID)
	require.Equal(t, events.OutcomePermanent, done.Outcome)
	require.Equal(t, "checking input: bad input", done.Error)

	reports := b.coord.reportsUntilDone(panicking.ID)
	done = reports[len(reports)-1]
	require.Equal(t, events.OutcomeError, done.Outcome)
	require.Equal(t, "panic: kaboom", done.Error)
	var stack string
	for _, r := range reports {
		for _, line := range r.Logs {
			stack += line.Level + " " + line.Message + "\n"
		}
	}
	require.Contains(t, stack, "error panic: kaboom\ngoroutine ")

	done = b.coord.done(bind.ID)
	require.Equal(t, events.OutcomePermanent, done.Outcome)
	require.Contains(t, done.Error, "decoding the args of job "+bind.ID)

	reports = b.coord.reportsUntilDone(unknown.ID)
	require.Equal(t, []string{events.ReportDone}, types(reports))
	require.Equal(t, events.OutcomePermanent, reports[0].Outcome)
	require.Equal(t, `no handler for task "nope" on executor "worker-1"`, reports[0].Error)

	// The executor keeps working after a panic.
	require.Equal(t, events.OutcomeSuccess, b.coord.done(ok.ID).Outcome)
}

// TestPoolSizeBoundsConcurrency: however many jobs the executor holds
// (with prefetch, up to twice its pool here), at most PoolSize run at
// once, and it never asks for more than it may hold.
func TestPoolSizeBoundsConcurrency(t *testing.T) {
	t.Parallel()
	for _, prefetch := range []int{-1, 0, 2} {
		t.Run(fmt.Sprintf("prefetch=%d", prefetch), func(t *testing.T) {
			t.Parallel()
			testPoolSizeBoundsConcurrency(t, prefetch)
		})
	}
}

func testPoolSizeBoundsConcurrency(t *testing.T, prefetch int) {
	b := setup(t)
	const poolSize, jobs = 3, 12
	// What the executor may hold: its pool and the jobs it prefetches (the
	// pool's size by default).
	capacity := poolSize + max(prefetch, 0)
	if prefetch == 0 {
		capacity = 2 * poolSize
	}
	var running, maxRunning, finished atomic.Int64
	started := make(chan string, jobs)
	tokens := make(chan struct{}, jobs)
	b.coord.mu.Lock()
	b.coord.poolSize = capacity
	b.coord.finished = func() int { return int(finished.Load()) }
	b.coord.mu.Unlock()
	e := newExecutor(t, b, executor.Config{PoolSize: poolSize, Prefetch: prefetch}, map[string]executor.Handler{
		"work": func(ctx context.Context, job *executor.Job) error {
			defer finished.Add(1)
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			started <- job.ID
			select {
			case <-tokens:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	var ids []string
	for range jobs {
		j := newJob("work", `{}`)
		ids = append(ids, j.ID)
		b.coord.add(j)
	}
	require.NoError(t, e.Start(context.Background()))

	for range poolSize {
		recv(t, started, "a job to start")
	}
	require.EqualValues(t, poolSize, running.Load())
	require.GreaterOrEqual(t, e.Running(), poolSize)
	require.LessOrEqual(t, e.Running(), capacity)
	for range jobs {
		tokens <- struct{}{}
	}
	for _, id := range ids {
		require.Equal(t, events.OutcomeSuccess, b.coord.done(id).Outcome)
	}
	require.EqualValues(t, poolSize, maxRunning.Load())

	require.NoError(t, e.Shutdown(context.Background())) // no more dispatch requests
	b.coord.mu.Lock()
	require.Empty(t, b.coord.violations)
	b.coord.mu.Unlock()
	for {
		select {
		case req := <-b.coord.dispatches:
			require.True(t, req.Slots >= 1 && req.Slots <= capacity, "slots %d", req.Slots)
			continue
		default:
		}
		break
	}
}

func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"wait": func(ctx context.Context, job *executor.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			return nil // the outcome is cancelled whatever the handler returns
		},
	})
	job := newJob("wait", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))
	recv(t, started, "the handler to start")

	b.coord.cancel("worker-1", "acme", job.ID, 1)
	reports := b.coord.reportsUntilDone(job.ID)
	require.Equal(t, []string{events.ReportDone}, types(requireStarted(t, reports)))
	require.Equal(t, events.OutcomeCancelled, reports[len(reports)-1].Outcome)
}

// TestShortJobFoldsItsStartIntoItsEnd: a job that ends within the start
// report's delay sends one report, its done report carrying when it
// started; one that runs longer reports its start on its own first.
func TestShortJobFoldsItsStartIntoItsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"quick": func(context.Context, *executor.Job) error { return nil },
		"long": func(ctx context.Context, _ *executor.Job) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		},
	})
	quick, long := newJob("quick", `{}`), newJob("long", `{}`)
	b.coord.add(quick, long)
	require.NoError(t, e.Start(context.Background()))

	reports := b.coord.reportsUntilDone(quick.ID)
	require.Equal(t, []string{events.ReportDone}, types(reports), "one report for a quick job")
	require.NotNil(t, reports[0].Started)
	require.False(t, reports[0].Started.After(reports[0].Time))

	// The long job's start comes on its own, while it runs (it may have
	// come before the quick job's end, and been kept).
	b.coord.report(long.ID, events.ReportStarted)
	close(release)
	done := b.coord.done(long.ID)
	require.Nil(t, done.Started, "its start was reported already")
	require.Equal(t, events.OutcomeSuccess, done.Outcome)
}

func TestCancelBeforeJobArrives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ran atomic.Bool
	e := newExecutor(t, b, executor.Config{WakeupPeriod: time.Hour}, map[string]executor.Handler{
		"work": func(context.Context, *executor.Job) error { ran.Store(true); return nil },
	})
	require.NoError(t, e.Start(context.Background()))
	b.coord.nextDispatch() // idle now

	job, other := newJob("work", `{}`), newJob("work", `{}`)
	b.coord.cancel("worker-1", "acme", job.ID, 1)
	b.coord.add(job, other)
	b.coord.notify()

	reports := b.coord.reportsUntilDone(job.ID)
	require.Equal(t, []string{events.ReportDone}, types(reports), "not started")
	require.Equal(t, events.OutcomeCancelled, reports[0].Outcome)
	require.Equal(t, events.OutcomeSuccess, b.coord.done(other.ID).Outcome)
	require.True(t, ran.Load(), "the other job ran")
}

func TestShutdownWaitsForRunningJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"work": func(ctx context.Context, job *executor.Job) error {
			started <- struct{}{}
			select {
			case <-release:
				return job.SetResult("finished")
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	job := newJob("work", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))
	recv(t, started, "the handler to start")

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		shutdown <- e.Shutdown(ctx)
	}()
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v while a job was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.Equal(t, 1, e.Running())
	close(release)
	require.NoError(t, recv(t, shutdown, "Shutdown to return"))

	done := b.coord.done(job.ID)
	require.Equal(t, events.OutcomeSuccess, done.Outcome)
	require.JSONEq(t, `"finished"`, string(done.Result))
	require.ErrorContains(t, e.Start(context.Background()), "Start after Shutdown")
}

func TestShutdownWithExpiredContextReleasesJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 2)
	e := newExecutor(t, b, executor.Config{PoolSize: 2}, map[string]executor.Handler{
		"work": func(ctx context.Context, job *executor.Job) error {
			job.Logger.Info("waiting")
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		},
	})
	j1, j2 := newJob("work", `{}`), newJob("work", `{}`)
	b.coord.add(j1, j2)
	require.NoError(t, e.Start(context.Background()))
	recv(t, started, "the first handler to start")
	recv(t, started, "the second handler to start")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := e.Shutdown(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, executor.ErrJobsReleased)
	require.ErrorContains(t, err, "running jobs released (2)")
	require.Equal(t, 0, e.Running())
	for _, id := range []string{j1.ID, j2.ID} {
		reports := requireStarted(t, b.coord.reportsUntilDone(id))
		require.Equal(t, events.OutcomeReleased, reports[len(reports)-1].Outcome)
		require.Equal(t, "released while it ran: the executor shut down before the job finished", reports[len(reports)-1].Error)
	}
	e.Stop() // safe after Shutdown
}

func TestDuplicateRegistrationRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.coord.mu.Lock()
	b.coord.registerErr = &fairway.Error{Code: fairway.CodeConflict, Message: `app id "worker-1" is in use by instance 1234 on host elsewhere`}
	b.coord.mu.Unlock()
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"work": func(context.Context, *executor.Job) error { return nil },
	})
	err := e.Start(context.Background())
	require.EqualError(t, err, `executor "worker-1": app id "worker-1" is in use by instance 1234 on host elsewhere`)
	require.ErrorIs(t, err, fairway.ErrConflict)
	select {
	case req := <-b.coord.dispatches:
		t.Fatalf("a refused executor asked for work: %+v", req)
	default:
	}
}

func TestStartWaitsForCoordinator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs syncBuffer
	e := newExecutor(t, b, executor.Config{
		Prefix: "nobody", // no coordinator answers under this prefix
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}, map[string]executor.Handler{
		"work": func(context.Context, *executor.Job) error { return nil },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := e.Start(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `executor "worker-1": no coordinator answered on nobody.exec.worker-1.register`)
	require.Contains(t, logs.String(), "waiting for a coordinator")
}

func TestJobLogArrivesBeforeDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var execLogs syncBuffer
	e := newExecutor(t, b, executor.Config{
		Logger: slog.New(slog.NewTextHandler(&execLogs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, map[string]executor.Handler{
		"work": func(ctx context.Context, job *executor.Job) error {
			job.Logger.Info("step one", "count", 3, "name", "a b")
			job.Logger.With("user", "ann").WithGroup("req").Warn("slow", "ms", 12, slog.Group("db", "rows", 7))
			job.Logger.Debug("details")
			job.Logger.Error("oops")
			return nil
		},
	})
	job := newJob("work", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))

	reports := requireStarted(t, b.coord.reportsUntilDone(job.ID))
	var lines []fairway.LogLine
	for _, r := range reports[:len(reports)-1] {
		require.Equal(t, events.ReportLog, r.Type)
		lines = append(lines, r.Logs...)
	}
	require.Len(t, lines, 4)
	var got []string
	for _, line := range lines {
		require.Equal(t, job.ID, line.JobID)
		require.Equal(t, 1, line.Attempt)
		require.False(t, line.Time.IsZero())
		got = append(got, line.Level+": "+line.Message)
	}
	require.Equal(t, []string{
		`info: step one count=3 name="a b"`,
		`warn: slow user=ann req.ms=12 req.db.rows=7`,
		`debug: details`,
		`error: oops`,
	}, got)
	require.Contains(t, execLogs.String(), `level=DEBUG msg="step one" executor=worker-1 job_id=`+job.ID)
}

func TestLogBufferOverflowIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const lines = 2000
	e := newExecutor(t, b, executor.Config{LogBufferSize: 5}, map[string]executor.Handler{
		"chatty": func(ctx context.Context, job *executor.Job) error {
			for i := range lines {
				job.Logger.Info("line " + strconv.Itoa(i))
			}
			return nil
		},
	})
	job := newJob("chatty", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))

	reports := b.coord.reportsUntilDone(job.ID)
	require.Equal(t, events.OutcomeSuccess, reports[len(reports)-1].Outcome)
	dropRE := regexp.MustCompile(`^(\d+) log lines dropped \(log-buffer-size is 5\)$`)
	kept, dropped := 0, 0
	for _, r := range reports {
		for _, line := range r.Logs {
			if m := dropRE.FindStringSubmatch(line.Message); m != nil {
				require.Equal(t, "warn", line.Level)
				n, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				dropped += n
				continue
			}
			kept++
		}
	}
	require.Positive(t, dropped)
	require.Equal(t, lines, kept+dropped, "every line is either sent or counted")
}

func TestNotifyWakesIdleExecutor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{WakeupPeriod: time.Hour}, map[string]executor.Handler{
		"work": func(context.Context, *executor.Job) error { return nil },
	})
	require.NoError(t, e.Start(context.Background()))
	first := b.coord.nextDispatch()
	require.Equal(t, executor.PoolSizeDefault, first.Slots)

	// Nothing was handed out: the executor is idle and does not ask again.
	select {
	case req := <-b.coord.dispatches:
		t.Fatalf("an idle executor asked again without a wakeup: %+v", req)
	case <-time.After(200 * time.Millisecond):
	}

	job := newJob("work", `{}`)
	b.coord.add(job)
	sent := time.Now()
	b.coord.notify()
	b.coord.nextDispatch()
	require.Less(t, time.Since(sent), 5*time.Second)
	require.Equal(t, events.OutcomeSuccess, b.coord.done(job.ID).Outcome)
}

func TestHeartbeatListsHeldJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	e := newExecutor(t, b, executor.Config{Heartbeat: 20 * time.Millisecond}, map[string]executor.Handler{
		"wait": func(ctx context.Context, job *executor.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		},
	})
	job := newJob("wait", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))
	reg := recv(t, b.coord.registers, "the registration")
	recv(t, started, "the handler to start")
	for {
		hb := recv(t, b.coord.heartbeats, "a heartbeat")
		require.Equal(t, "worker-1", hb.Executor)
		require.Equal(t, reg.Executor.Instance, hb.Instance)
		require.Equal(t, executor.PoolSizeDefault, hb.Slots)
		if len(hb.Jobs) == 1 {
			require.Equal(t, []fairway.JobRef{{Group: "acme", ID: job.ID}}, hb.Jobs)
			break
		}
	}
	b.coord.cancel("worker-1", "acme", job.ID, 1)
	require.Equal(t, events.OutcomeCancelled, b.coord.done(job.ID).Outcome)
}

func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"big": func(ctx context.Context, job *executor.Job) error {
			return job.SetResult(strings.Repeat("x", 8<<20))
		},
	})
	job := newJob("big", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))
	done := b.coord.done(job.ID)
	require.Equal(t, events.OutcomeError, done.Outcome)
	require.Contains(t, done.Error, "more than the")
}

func TestShutdownReleasesHandlerThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	unblock := make(chan struct{})
	returned := make(chan struct{})
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"stubborn": func(ctx context.Context, job *executor.Job) error {
			defer close(returned)
			started <- struct{}{}
			<-unblock // ignores ctx
			job.Logger.Info("too late")
			return nil
		},
	})
	job := newJob("stubborn", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))
	recv(t, started, "the handler to start")

	stopped := make(chan struct{})
	go func() {
		e.Stop()
		close(stopped)
	}()
	recv(t, stopped, "Stop to give up on the handler")
	require.Equal(t, events.OutcomeReleased, b.coord.done(job.ID).Outcome)
	require.Equal(t, 0, e.Running())

	close(unblock)
	recv(t, returned, "the handler to return")
}

// TestRegistersAgainWhenNotKnown: a coordinator that answers a dispatch
// request with not_registered (the database was restored) makes the
// executor register the same instance again, and then get jobs.
func TestRegistersAgainWhenNotKnown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ran := make(chan string, 1)
	e := newExecutor(t, b, executor.Config{PoolSize: 1}, map[string]executor.Handler{
		"noop": func(_ context.Context, job *executor.Job) error { ran <- job.ID; return nil },
	})
	b.coord.mu.Lock()
	b.coord.dispatchErr = fairway.NotRegistered("worker-1", "whatever")
	b.coord.mu.Unlock()
	require.NoError(t, e.Start(t.Context()))
	first := recv(t, b.coord.registers, "the registration")
	b.coord.nextDispatch() // answered not_registered
	again := recv(t, b.coord.registers, "the second registration")
	require.Equal(t, first.Executor.Instance, again.Executor.Instance, "the same instance registers again")

	job := newJob("noop", `{}`)
	b.coord.add(job)
	b.coord.notify()
	require.Equal(t, job.ID, recv(t, ran, "the job after registering again"))
	require.NoError(t, e.Shutdown(context.Background()))
}

// TestAWakeupEndsThePauseAfterUnavailable: a dispatch request answered
// unavailable (the partition's database down) is asked again under its
// id after a pause, which a notification of work ends: work was stored,
// so the database answers again.
func TestAWakeupEndsThePauseAfterUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ran := make(chan string, 1)
	e := newExecutor(t, b, executor.Config{PoolSize: 1, WakeupPeriod: time.Hour}, map[string]executor.Handler{
		"noop": func(_ context.Context, job *executor.Job) error { ran <- job.ID; return nil },
	})
	e.SetDispatchBackoff(time.Hour) // only the wakeup can end it
	b.coord.mu.Lock()
	b.coord.dispatchErr = &fairway.Error{Code: fairway.CodeUnavailable, Message: "the partition's leader cannot answer now"}
	b.coord.mu.Unlock()
	require.NoError(t, e.Start(t.Context()))
	first := b.coord.nextDispatch() // answered unavailable
	job := newJob("noop", `{}`)
	b.coord.add(job)
	b.coord.notify()
	again := b.coord.nextDispatch()
	require.Equal(t, first.RequestID, again.RequestID, "asked again under its id")
	require.Equal(t, job.ID, recv(t, ran, "the job stored meanwhile"))
	require.NoError(t, e.Shutdown(context.Background()))
}

// TestUnansweredDispatchIsSentAgainUnderItsID: a dispatch request that got
// no answer (the coordinator may have claimed jobs for it) is sent again
// with the same id; after an answer, a new request has a new id.
func TestUnansweredDispatchIsSentAgainUnderItsID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{PoolSize: 1}, map[string]executor.Handler{
		"noop": func(context.Context, *executor.Job) error { return nil },
	})
	b.coord.mu.Lock()
	b.coord.dropNext = true
	b.coord.mu.Unlock()
	require.NoError(t, e.Start(t.Context()))
	first := b.coord.nextDispatch() // unanswered: times out after 5 s
	require.NotEmpty(t, first.RequestID)
	again := b.coord.nextDispatch()
	require.Equal(t, first.RequestID, again.RequestID, "sent again under its id")
	b.coord.notify() // the answered request is followed by a new one
	next := b.coord.nextDispatch()
	require.NotEqual(t, first.RequestID, next.RequestID)
	require.NoError(t, e.Shutdown(context.Background()))
}

// TestPingNamingAnotherInstanceIsNotAnswered: a coordinator asking whether
// instance X of an app-id is alive must not get the answer of another
// instance of that app-id.
func TestPingNamingAnotherInstanceIsNotAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{PoolSize: 1}, map[string]executor.Handler{
		"noop": func(context.Context, *executor.Job) error { return nil },
	})
	require.NoError(t, e.Start(t.Context()))
	reg := recv(t, b.coord.registers, "the registration")
	subject := b.coord.subjects.Ping("worker-1")
	msg, err := b.coord.nc.Request(subject, []byte(reg.Executor.Instance), waitTimeout)
	require.NoError(t, err)
	require.Equal(t, reg.Executor.Instance, string(msg.Data))
	_, err = b.coord.nc.Request(subject, []byte("another-instance"), 300*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "answered a ping for another instance")
	require.NoError(t, e.Shutdown(context.Background()))
}

// TestCancelNamesGroupJobAndAttempt: a cancel command must name the group,
// the job and the attempt held. Attempt 0 used to mean "whatever attempt is
// held", which let any message that reached the cancel subject (say, a
// rejected event naming the job, attempt 0) cancel a running job; a wrong
// attempt or another group's job of the same id cancels nothing either.
func TestCancelNamesGroupJobAndAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	running := make(chan context.Context, 1)
	e := newExecutor(t, b, executor.Config{}, map[string]executor.Handler{
		"wait": func(ctx context.Context, job *executor.Job) error {
			running <- ctx
			<-ctx.Done()
			return nil
		},
	})
	job := newJob("wait", `{}`)
	b.coord.add(job)
	require.NoError(t, e.Start(context.Background()))
	reg := recv(t, b.coord.registers, "the registration")
	ctx := recv(t, running, "the handler to start")

	// Each command is handled before its reply comes.
	reply := b.coord.cancel("worker-1", "acme", job.ID, 0)
	require.NotNil(t, reply.Error, "attempt 0 names no attempt")
	require.Equal(t, "attempt", reply.Error.Field)
	reply = b.coord.cancel("worker-1", "", job.ID, 1)
	require.NotNil(t, reply.Error, "no group")
	require.Equal(t, "group", reply.Error.Field)
	require.Nil(t, b.coord.cancel("worker-1", "acme", job.ID, 2).Error)
	require.Nil(t, b.coord.cancel("worker-1", "globex", job.ID, 1).Error)
	require.NoError(t, ctx.Err(), "no command above names the attempt held")

	require.Nil(t, b.coord.cancel("worker-1", "acme", job.ID, 1).Error)
	reports := b.coord.reportsUntilDone(job.ID)
	require.Equal(t, []string{events.ReportDone}, types(requireStarted(t, reports)))
	require.Equal(t, events.OutcomeCancelled, reports[len(reports)-1].Outcome)
	for _, r := range reports {
		require.Equal(t, "acme", r.Group, "reports name the job's group")
		require.Equal(t, reg.Executor.Instance, r.Instance, "and the instance holding it")
		require.Equal(t, "worker-1", r.Executor)
	}
}

// TestEarlyCancelForAnotherAttemptIsNotApplied: a cancel that comes before
// its job is remembered for the attempt it names only.
func TestEarlyCancelForAnotherAttemptIsNotApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newExecutor(t, b, executor.Config{WakeupPeriod: time.Hour}, map[string]executor.Handler{
		"work": func(context.Context, *executor.Job) error { return nil },
	})
	require.NoError(t, e.Start(context.Background()))
	b.coord.nextDispatch() // idle now

	job := newJob("work", `{}`) // attempt 1
	require.Nil(t, b.coord.cancel("worker-1", "acme", job.ID, 2).Error)
	require.Nil(t, b.coord.cancel("worker-1", "globex", job.ID, 1).Error)
	b.coord.add(job)
	b.coord.notify()
	require.Equal(t, events.OutcomeSuccess, b.coord.done(job.ID).Outcome)
}

// Shutdown deregisters, naming the instance that registered, and waits
// for the answer.
func TestShutdownDeregisters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type deregistration struct {
		req     events.DeregisterRequest
		subject string
	}
	deregistered := make(chan deregistration, 1)
	_, err := b.coord.nc.Subscribe(b.coord.subjects.ExecAll(events.ExecDeregister), func(msg *nats.Msg) {
		d := deregistration{subject: msg.Subject}
		if err := json.Unmarshal(msg.Data, &d.req); err != nil {
			t.Errorf("undecodable deregister request: %v", err)
		}
		deregistered <- d
		b.coord.respond(msg, events.Reply{})
	})
	require.NoError(t, err)
	require.NoError(t, b.coord.nc.Flush())

	job := newJob("work", `{}`)
	b.coord.add(job)
	e := start(t, b, executor.Config{}, map[string]executor.Handler{
		"work": func(_ context.Context, job *executor.Job) error { return job.SetResult("ok") },
	})
	registered := recv(t, b.coord.registers, "the registration")
	require.Equal(t, events.OutcomeSuccess, b.coord.done(job.ID).Outcome)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	select {
	case d := <-deregistered:
		require.Equal(t, b.coord.subjects.Exec("worker-1", events.ExecDeregister), d.subject)
		require.Equal(t, events.DeregisterRequest{Executor: "worker-1", Instance: registered.Executor.Instance}, d.req)
	default:
		t.Fatal("Shutdown returned without deregistering")
	}
}

// prefetchingExecutor starts an executor of 1 slot that may hold 2 jobs
// beyond it, whose task "work" reports each start on started and ends
// with a token. Two quick jobs, one after the other, teach it that jobs
// are short and how long a dispatch round trip takes (the second request
// finds work waiting); it returns once it asks for its slot and the 2 it
// may hold.
func prefetchingExecutor(t *testing.T) (*bundle, *executor.Executor, chan string, chan struct{}) {
	t.Helper()
	b := setup(t)
	started := make(chan string, 10)
	tokens := make(chan struct{}, 10)
	e := newExecutor(t, b, executor.Config{PoolSize: 1, Prefetch: 2, WakeupPeriod: time.Hour}, map[string]executor.Handler{
		"work": func(ctx context.Context, job *executor.Job) error {
			started <- job.ID
			select {
			case <-tokens:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	// Two quick jobs, one after the other: the executor learns that jobs
	// are short, and how long a dispatch round trip takes (the second
	// request finds work waiting). A round trip of 50 ms against jobs of
	// microseconds: on a loaded machine (CI runs packages side by side) a
	// round trip on the loopback can look no longer than a job, and the
	// executor then rightly holds none, which is not what these tests are
	// about.
	b.coord.mu.Lock()
	b.coord.latency = 50 * time.Millisecond
	b.coord.mu.Unlock()
	first, second := newJob("work", `{}`), newJob("work", `{}`)
	b.coord.add(first, second)
	tokens <- struct{}{}
	tokens <- struct{}{}
	require.NoError(t, e.Start(context.Background()))
	require.Equal(t, first.ID, recv(t, started, "the first job"))
	require.Equal(t, second.ID, recv(t, started, "the second job"))
	require.Equal(t, events.OutcomeSuccess, b.coord.done(first.ID).Outcome)
	require.Equal(t, events.OutcomeSuccess, b.coord.done(second.ID).Outcome)
	for req := b.coord.nextDispatch(); req.Slots != 3; req = b.coord.nextDispatch() {
		// Until it has asked again for its slot and the 2 it may hold.
	}
	return b, e, started, tokens
}

// TestPrefetchHoldsJobsBeyondThePool: with short jobs the executor asks
// for more jobs than it has slots; the extra ones wait for a slot and
// start the moment one frees. A held job that is cancelled ends without
// running; at shutdown a held job is released unrun while the running one
// finishes.
func TestPrefetchHoldsJobsBeyondThePool(t *testing.T) {
	t.Parallel()
	b, e, started, tokens := prefetchingExecutor(t)

	j1, j2, j3 := newJob("work", `{}`), newJob("work", `{}`), newJob("work", `{}`)
	b.coord.add(j1, j2, j3)
	b.coord.notify()
	require.Equal(t, j1.ID, recv(t, started, "the first of three jobs"))
	require.Equal(t, 3, e.Running(), "one job runs, two wait for its slot")

	b.coord.cancel("worker-1", "acme", j3.ID, 1)
	reports := b.coord.reportsUntilDone(j3.ID)
	require.Equal(t, []string{events.ReportDone}, types(reports), "a held job cancelled never started")
	require.Equal(t, events.OutcomeCancelled, reports[0].Outcome)
	require.Equal(t, "cancelled before it started", reports[0].Error)

	tokens <- struct{}{}
	require.Equal(t, events.OutcomeSuccess, b.coord.done(j1.ID).Outcome)
	require.Equal(t, j2.ID, recv(t, started, "the held job, once the slot is free"))

	// j4 is held behind j2; shutdown hands it back unrun, and j2 finishes.
	// j1 ran for as long as the steps above took: on a loaded machine that
	// makes jobs look long, and an executor holds none of long jobs; and
	// j2 runs until the test lets it, which a short estimate would take for
	// a job that runs long, behind which it holds none. The estimates are
	// set to jobs and round trips of a minute: j2 is young.
	e.SetPrefetchEstimates(time.Minute, time.Minute)
	j4 := newJob("work", `{}`)
	b.coord.add(j4)
	b.coord.notify()
	for {
		b.coord.nextDispatch()
		b.coord.mu.Lock()
		handedOut := len(b.coord.queue) == 0
		b.coord.mu.Unlock()
		if handedOut {
			break
		}
	}
	// Received, not only sent: a reply still on its way when the shutdown
	// begins is released at once, before or after the stop request (the
	// ordering checked below is that of a job held).
	require.Eventually(t, func() bool { return e.Running() == 2 }, waitTimeout, time.Millisecond, "j2 runs and j4 is held")
	stopped := make(chan error, 1)
	go func() { stopped <- e.Shutdown(context.Background()) }()
	reports = b.coord.reportsUntilDone(j4.ID)
	require.Equal(t, []string{events.ReportDone}, types(reports))
	require.Equal(t, events.OutcomeReleased, reports[0].Outcome)
	require.Equal(t, "released before it started: the executor is shutting down", reports[0].Error)
	// The leader heard that the instance stops before the release (the
	// stand-in records it before answering), so it could not hand the job
	// straight back.
	require.Len(t, b.coord.stops, 1, "the executor said it stops before it released the held job")
	stop := <-b.coord.stops
	require.Equal(t, "worker-1", stop.Executor)
	require.NotEmpty(t, stop.Instance)
	tokens <- struct{}{}
	require.Equal(t, events.OutcomeSuccess, b.coord.done(j2.ID).Outcome)
	require.NoError(t, recv(t, stopped, "the shutdown"))
	select {
	case id := <-started:
		t.Fatalf("job %s started after the shutdown began", id)
	default:
	}
}

// TestHeldJobThatEndsUnrunLeavesTheLine: a job held for a slot that ends
// without running (no handler for its task) gives up its place: the job
// behind it runs when the slot frees (it used to be handed the slot of the
// job that had already ended, and wait for ever).
func TestHeldJobThatEndsUnrunLeavesTheLine(t *testing.T) {
	t.Parallel()
	b, _, started, tokens := prefetchingExecutor(t)

	running, unknown, next := newJob("work", `{}`), newJob("nope", `{}`), newJob("work", `{}`)
	b.coord.add(running, unknown, next)
	b.coord.notify()
	require.Equal(t, running.ID, recv(t, started, "the first of three jobs"))
	require.Equal(t, events.OutcomePermanent, b.coord.done(unknown.ID).Outcome, "no handler: ends at once, unrun")
	tokens <- struct{}{}
	require.Equal(t, next.ID, recv(t, started, "the job behind it, once the slot frees"))
	tokens <- struct{}{}
	require.Equal(t, events.OutcomeSuccess, b.coord.done(next.ID).Outcome)
}

// TestNoJobIsHeldBehindAJobThatRunsLong: after short jobs an executor
// holds jobs beyond its pool, but not behind a job that has run more than
// twice as long as jobs do: its slot does not count as one that frees
// soon, and the executor asks for none to hold (a job held there would
// wait behind it while another executor may be idle); once the job ends,
// it holds again.
func TestNoJobIsHeldBehindAJobThatRunsLong(t *testing.T) {
	t.Parallel()
	b, e, started, tokens := prefetchingExecutor(t)
	// Jobs of a nanosecond, round trips of a millisecond: two held when
	// the slot frees soon.
	e.SetPrefetchEstimates(time.Nanosecond, time.Millisecond)
	require.Equal(t, 2, e.PrefetchTarget(), "its slot free")
	long := newJob("work", `{}`)
	b.coord.add(long)
	b.coord.notify()
	require.Equal(t, long.ID, recv(t, started, "the long job"))
	require.Zero(t, e.PrefetchTarget(), "behind a job that has run longer than twice a job's time")
	tokens <- struct{}{}
	require.Equal(t, events.OutcomeSuccess, b.coord.done(long.ID).Outcome)
	e.SetPrefetchEstimates(time.Nanosecond, time.Millisecond) // its run of the test's length made jobs look long
	require.Eventually(t, func() bool { return e.PrefetchTarget() == 2 }, waitTimeout, time.Millisecond, "its slot free again")
}

// TestAHeldJobWhoseSlotDoesNotFreeGoesBack: a job held beyond the pool
// whose slot does not free within its expected wait (four times a job's
// average run, a second at least) goes back to waiting, for another
// executor, saying why; the running job goes on.
func TestAHeldJobWhoseSlotDoesNotFreeGoesBack(t *testing.T) {
	t.Parallel()
	b, e, started, tokens := prefetchingExecutor(t)
	// Jobs of half a second, round trips as long: one job held, for two
	// seconds at most.
	e.SetPrefetchEstimates(500*time.Millisecond, 500*time.Millisecond)
	running, held := newJob("work", `{}`), newJob("work", `{}`)
	b.coord.add(running, held)
	b.coord.notify()
	require.Equal(t, running.ID, recv(t, started, "the first job"))
	reports := b.coord.reportsUntilDone(held.ID)
	require.Equal(t, []string{events.ReportDone}, types(reports), "the held job never started")
	require.Equal(t, events.OutcomeReleased, reports[0].Outcome)
	require.Equal(t, "released before it started: no slot of this executor freed within 2s (its running jobs run long); back to waiting for another executor", reports[0].Error)
	// The release is reported before the executor lets go of the job
	// (complete publishes, then frees the slot): await the count.
	require.Eventually(t, func() bool { return e.Running() == 1 }, waitTimeout, time.Millisecond, "the held job let go, the running one kept")
	tokens <- struct{}{}
	require.Equal(t, events.OutcomeSuccess, b.coord.done(running.ID).Outcome)
}

// TestAnAttemptHandedOutAgainIsNotRunAgain: a job attempt the executor
// ran, handed out again (a coordinator that took it for still held, its
// reports not yet stored), is not run twice; the job's next attempt is.
func TestAnAttemptHandedOutAgainIsNotRunAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	runs := map[int]int{}
	e := newExecutor(t, b, executor.Config{WakeupPeriod: time.Hour}, map[string]executor.Handler{
		"work": func(_ context.Context, job *executor.Job) error {
			mu.Lock()
			runs[job.Attempt]++
			mu.Unlock()
			return nil
		},
	})
	require.NoError(t, e.Start(context.Background()))
	b.coord.nextDispatch() // idle now

	job := newJob("work", `{}`) // attempt 1
	b.coord.add(job)
	b.coord.notify()
	require.Equal(t, events.OutcomeSuccess, b.coord.done(job.ID).Outcome)
	next := job
	next.Attempt = 2
	b.coord.add(job, next) // attempt 1 again, then attempt 2
	b.coord.notify()
	require.Equal(t, 2, b.coord.done(job.ID).Attempt, "the next report is the second attempt's")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[int]int{1: 1, 2: 1}, runs)
}
