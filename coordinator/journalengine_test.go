package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// setupJournal is setup on the journal engine (coordinator.EngineJournal).
func setupJournal(t *testing.T) *harness {
	t.Helper()
	retries := 3
	h, _ := setupOn(t, storetest.Open(t), coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries})
	return h
}

// TestJournalEngineRunsAJobWithItsEvents: on the journal engine a job
// goes through the same states, with the same events, as on the row
// engine (TestJobRunsEndToEndWithEvents), and its record, written at its
// end, is what the API reads.
func TestJournalEngineRunsAJobWithItsEvents(t *testing.T) {
	t.Parallel()
	h := setupJournal(t)
	id := runsEndToEnd(t, h)
	job, err := h.client.Get(t.Context(), "acme", id)
	require.NoError(t, err)
	require.Equal(t, "ex1", job.Executor)
	require.NotNil(t, job.Started)
	require.NotNil(t, job.Finished)
}

// TestJournalEngineRetriesAndFails: a failed attempt is retried after the
// retry delay, a job out of retries and a permanent error fail, with the
// events TestRetriesThenSuccessAndExhaustion expects.
func TestJournalEngineRetriesAndFails(t *testing.T) {
	t.Parallel()
	h := setupJournal(t)
	retriesThenExhaustion(t, h, map[string]executor.Handler{
		"perm": func(context.Context, *executor.Job) error { return fairway.Permanent(errors.New("bad input")) },
	})

	perm := submit(t, h, fairway.Submission{Group: "g", Task: "perm"})
	evs := h.final(perm)
	require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>failed"}, transitions(evs))
	require.Equal(t, "bad input", evs[3].Error)
	job, err := h.client.Get(t.Context(), "g", perm)
	require.NoError(t, err)
	require.Equal(t, fairway.StateFailed, job.State)
	require.Equal(t, "bad input", job.Error)
}

// TestJournalEngineRunsEveryJobOnce: 600 jobs of 6 groups, submitted in
// batches, on two executors: each runs once and ends in success, its
// record holding its result, and a submission sent again under its id
// makes no second job.
func TestJournalEngineRunsEveryJobOnce(t *testing.T) {
	t.Parallel()
	h := setupJournal(t)
	var mu sync.Mutex
	runs := map[string]int{}
	handler := func(ctx context.Context, job *executor.Job) error {
		mu.Lock()
		runs[job.Group+"/"+job.ID]++
		mu.Unlock()
		return echo(ctx, job)
	}
	h.executor("ex1", 8, map[string]executor.Handler{"echo": handler})
	h.executor("ex2", 8, map[string]executor.Handler{"echo": handler})
	const jobs = 600
	var subs []fairway.Submission
	for i := range jobs {
		subs = append(subs, fairway.Submission{Group: fmt.Sprintf("tenant-%d", i%6), ID: fmt.Sprintf("job-%04d", i), Task: "echo",
			Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	for i := 0; i < jobs; i += 100 {
		_, err := h.client.SubmitMany(t.Context(), subs[i:i+100])
		require.NoError(t, err)
	}
	// The first hundred again: duplicates.
	_, err := h.client.SubmitMany(t.Context(), subs[:100])
	require.NoError(t, err)
	h.allSucceed(jobs)
	mu.Lock()
	for key, n := range runs {
		require.Equal(t, 1, n, "job %s ran %d times", key, n)
	}
	require.Len(t, runs, jobs)
	mu.Unlock()
	for _, i := range []int{0, 99, 377, jobs - 1} {
		job, err := h.client.Get(t.Context(), subs[i].Group, subs[i].ID)
		require.NoError(t, err)
		require.Equal(t, fairway.StateSuccess, job.State)
		require.JSONEq(t, string(subs[i].Args), string(job.Result))
	}
	var records int
	require.NoError(t, h.store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM fairway_job`).Scan(&records))
	require.Equal(t, jobs, records, "one record per job, none for a duplicate")
}

// TestJournalEngineRunsADependentAfterItsDependency: a job that depends
// on another waits, pending, until it succeeds, then runs; a dependent of
// a job that fails is cancelled with it.
func TestJournalEngineRunsADependentAfterItsDependency(t *testing.T) {
	t.Parallel()
	h := setupJournal(t)
	release := make(chan struct{})
	h.executor("ex1", 4, map[string]executor.Handler{
		"first": func(ctx context.Context, job *executor.Job) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		},
		"echo": echo,
		"perm": func(context.Context, *executor.Job) error { return fairway.Permanent(errors.New("bad input")) },
	})
	first := submit(t, h, fairway.Submission{Group: "acme", ID: "first", Task: "first"})
	then := submit(t, h, fairway.Submission{Group: "acme", ID: "then", Task: "echo", Args: json.RawMessage(`{"n":2}`), DependsOn: []string{first}})
	close(release)
	require.Equal(t, []string{">pending", "pending>waiting", "waiting>scheduled", "scheduled>running", "running>success"}, transitions(h.final(then)))

	bad := submit(t, h, fairway.Submission{Group: "acme", ID: "bad", Task: "perm"})
	orphan := submit(t, h, fairway.Submission{Group: "acme", ID: "orphan", Task: "echo", DependsOn: []string{bad}})
	evs := h.final(orphan)
	require.Equal(t, fairway.StateCancelled, evs[len(evs)-1].State)
}

// TestJournalEngineRefusesATrackerHeldByALiveJob: a submission whose
// tracker a live job of its group holds is rejected, naming the field;
// once that job ended, the
// tracker is free again.
func TestJournalEngineRefusesATrackerHeldByALiveJob(t *testing.T) {
	t.Parallel()
	h := setupJournal(t)
	release := make(chan struct{})
	h.executor("ex1", 2, map[string]executor.Handler{"hold": func(ctx context.Context, _ *executor.Job) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	holder := submit(t, h, fairway.Submission{Group: "acme", ID: "holder", Task: "hold", Tracker: "invoice-7"})
	dup := submit(t, h, fairway.Submission{Group: "acme", ID: "dup", Task: "hold", Tracker: "invoice-7"})
	evs := h.until(func(ev events.Event) bool { return ev.JobID == dup && ev.State == fairway.StateRejected })
	last := evs[len(evs)-1]
	require.Equal(t, fairway.CodeDuplicate, last.Code)
	require.Equal(t, "tracker", last.Field)
	close(release)
	evs = h.final(holder)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
	again := submit(t, h, fairway.Submission{Group: "acme", ID: "again", Task: "hold", Tracker: "invoice-7"})
	evs = h.final(again)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
}

// TestJournalEngineReleasesALostExecutorsJobs: an executor that falls
// silent (its connection gone, no deregistration) loses its running job
// after a lease, counted as a failed attempt (the lease sweeper has the
// leader give it back), and the job runs again on another executor.
func TestJournalEngineReleasesALostExecutorsJobs(t *testing.T) {
	t.Parallel()
	retries := 3
	h, _ := setupOn(t, storetest.Open(t), coordinator.Config{Lease: time.Second,
		RetryDelay: 20 * time.Millisecond, Retries: &retries})
	// One slot, which the job takes: no dispatch request of the dying
	// executor is left parked at the leader (its long poll lasts as long
	// as the lease here) to be handed the job once it is given back.
	deadConn, err := nats.Connect(h.ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(deadConn.Close)
	dying, err := executor.New(deadConn, executor.Config{AppID: "dying", PoolSize: 1, WakeupPeriod: time.Hour, Heartbeat: time.Second, Logger: testLogger(t)})
	require.NoError(t, err)
	dying.Handle("work", blockUntilDone)
	require.NoError(t, dying.Start(t.Context()))
	t.Cleanup(dying.Stop)
	id := submit(t, h, fairway.Submission{Group: "acme", Task: "work"})
	h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateRunning })
	deadConn.Close() // silent from now on: no heartbeat, no report, no deregistration
	h.startExecutorWith("alive", time.Second, "work", echo)
	evs := h.final(id)
	require.Equal(t, []string{"running>stuck", "stuck>scheduled", "scheduled>running", "running>success"}, transitions(evs))
	require.Equal(t, "executor lost: its lease expired without a heartbeat", evs[0].Error)
	require.Equal(t, "alive", evs[3].Executor)
	require.Equal(t, 2, evs[3].Attempt)
}

// TestJournalEnginesFollowerTakesOverDispatch: with two coordinators on
// the journal engine, only the partition's leader answers dispatch
// requests (a follower can claim nothing, and must not hold requests
// back); when the leader stops (it gives its lease up:
// TestAStoppedCoordinatorGivesTheJournalsLeaseUp), the follower comes to
// lead, answers them,
// and the jobs submitted since run. Without the follower's taking over
// the dispatch subject, no job would run after the stop.
func TestJournalEnginesFollowerTakesOverDispatch(t *testing.T) {
	t.Parallel()
	h, first, _ := twoJournalCoordinators(t)
	h.executor("ex1", 4, map[string]executor.Handler{"echo": echo})

	before := submit(t, h, fairway.Submission{Group: "acme", Task: "echo"})
	require.Equal(t, fairway.StateSuccess, lastState(h.final(before)))
	first.Stop()
	for range 5 { // one at a time: final drops the events of other jobs
		id := submit(t, h, fairway.Submission{Group: "acme", Task: "echo"})
		require.Equal(t, fairway.StateSuccess, lastState(h.final(id)), "job %s, submitted after the leader stopped", id)
	}
}

// TestJournalEngineGaugesCountTheUnfinishedJobs: on the journal, the queue
// gauges (fairway_jobs, fairway_oldest_due_seconds,
// fairway_jobs_without_executor) count the partition's unfinished jobs
// from its state; the records are of ended jobs only, and they counted
// none before. fairway_cluster_leader says the coordinator leads.
func TestJournalEngineGaugesCountTheUnfinishedJobs(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	retries := 3
	st := storetest.Open(t)
	h, _ := setupOn(t, st, coordinator.Config{Metrics: reg, RetryDelay: 20 * time.Millisecond, Retries: &retries})
	h.executor("ex1", 1, map[string]executor.Handler{"echo": echo})
	// A task no executor runs: the API would refuse it, a transaction
	// of the application's stores it.
	tx, err := st.Pool().Begin(t.Context())
	require.NoError(t, err)
	for i := range 5 {
		_, err = istore.InsertTx(t.Context(), tx, istore.TxOptions{}, fairway.Submission{ID: fmt.Sprint("j-", i), Group: "acme", Task: "nobody", Pending: i < 3})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(t.Context()))
	_, err = h.client.SubmitWait(t.Context(), fairway.Submission{ID: "done", Group: "globex", Task: "echo"})
	require.NoError(t, err)
	h.final("done")

	values := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += "," + l.GetName() + "=" + l.GetValue()
			}
			switch f.GetName() {
			case "fairway_jobs", "fairway_jobs_without_executor", "fairway_cluster_leader":
				values[f.GetName()+labels] = m.GetGauge().GetValue()
			case "fairway_oldest_due_seconds":
				require.Positive(t, m.GetGauge().GetValue(), "the waiting jobs have been due since their submission")
				values[f.GetName()+labels] = 1
			}
		}
	}
	require.Equal(t, map[string]float64{
		"fairway_jobs,group=acme,state=pending,task=nobody": 3,
		"fairway_jobs,group=acme,state=waiting,task=nobody": 2,
		"fairway_jobs_without_executor,task=nobody":         5,
		"fairway_oldest_due_seconds,group=acme,task=nobody": 1,
		"fairway_cluster_leader":                            1,
	}, values, "the ended job is not counted; the coordinator alone leads the cluster")
}

// TestJournalEngineKeepsJobLogs: on the journal, a job's log lines are
// kept while it runs (read then from the partition's state, with no record
// yet) and after it ended; pruning the job deletes them, and frees its id
// (a submission of it is a new job again). Before,
// the journal dropped every line.
func TestJournalEngineKeepsJobLogs(t *testing.T) {
	t.Parallel()
	h := setupJournal(t)
	ctx := t.Context()
	gate := make(chan struct{})
	h.executor("ex1", 1, map[string]executor.Handler{"chatty": func(ctx context.Context, job *executor.Job) error {
		job.Logger.Info("first line", "attempt", job.Attempt)
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		job.Logger.Info("last line")
		return nil
	}})
	const id = "talks"
	_, err := h.client.SubmitWait(ctx, fairway.Submission{ID: id, Group: "acme", Task: "chatty"})
	require.NoError(t, err)
	// A line comes with the executor's next batch of reports: no event
	// says it is stored, so the test reads until it is.
	var lines []fairway.LogLine
	require.Eventually(t, func() bool {
		var err error
		lines, err = h.client.Logs(ctx, "acme", id)
		require.NoError(t, err, "the running job's log")
		return len(lines) > 0
	}, waitTimeout, 10*time.Millisecond, "the running job's line")
	require.Len(t, lines, 1)
	require.Contains(t, lines[0].Message, "first line")
	close(gate)
	h.final(id)
	lines, err = h.client.Logs(ctx, "acme", id)
	require.NoError(t, err)
	require.Len(t, lines, 2, "both lines, read once the job ended")
	require.Contains(t, lines[1].Message, "last line")
	_, err = h.client.Logs(ctx, "acme", "never-submitted")
	require.ErrorIs(t, err, fairway.ErrNotFound)

	n, err := h.client.Prune(ctx, events.PruneRequest{State: fairway.StateSuccess, OlderThan: "0s"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = h.client.Logs(ctx, "acme", id)
	require.ErrorIs(t, err, fairway.ErrNotFound)
	var kept int
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM fairway_job_log) + (SELECT count(*) FROM fairway_job_id)`).Scan(&kept))
	require.Zero(t, kept, "its log lines and its id went with its record")
	job, err := h.client.SubmitWait(ctx, fairway.Submission{ID: id, Group: "acme", Task: "chatty", Pending: true})
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, job.State, "its id is free again")
}

// TestStatsCountUnfinishedJobs: stats count two jobs that ended, one
// running, three waiting for a task no executor runs: the unfinished ones
// from the partition's state (the queue, the running job's start, the
// groups' series), the ended ones from their records.
func TestStatsCountUnfinishedJobs(t *testing.T) {
	t.Parallel()
	statsCountUnfinishedJobs(t, setup(t))
}

func statsCountUnfinishedJobs(t *testing.T, h *harness) {
	ctx := t.Context()
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	h.executor("ex1", 2, map[string]executor.Handler{"echo": echo, "slow": func(ctx context.Context, _ *executor.Job) error {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return ctx.Err()
	}})
	for range 2 {
		h.final(submit(t, h, fairway.Submission{Group: "a", Task: "echo"}))
	}
	slow := submit(t, h, fairway.Submission{Group: "a", Task: "slow"})
	h.until(func(ev events.Event) bool { return ev.JobID == slow && ev.State == fairway.StateRunning })
	tx, err := h.store.Pool().Begin(ctx)
	require.NoError(t, err)
	for range 3 { // a task no executor runs: the API would refuse it
		_, err = istore.InsertTx(ctx, tx, istore.TxOptions{}, fairway.Submission{Group: "a", Task: "nobody"})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))

	// The stats fold what was committed before them: the transaction's
	// jobs are counted at once.
	stats, err := h.client.Stats(ctx, "", events.StatsRequest{Window: "10m", Bucket: "1m"})
	require.NoError(t, err)
	queue := map[string]int64{}
	for _, q := range stats.Queue {
		queue[q.Group+"/"+q.Task+"/"+string(q.State)] = q.Jobs
	}
	require.Equal(t, map[string]int64{"a/nobody/waiting": 3, "a/slow/running": 1}, queue)
	finished := map[string]int64{}
	for _, f := range stats.Finished {
		finished[f.Group+"/"+f.Task+"/"+string(f.State)] += f.Jobs
	}
	require.Equal(t, map[string]int64{"a/echo/success": 2}, finished)
	require.Equal(t, int64(3), stats.All.Started, "the two ended and the running one")
	require.Equal(t, int64(2), stats.All.Ended)
	require.Len(t, stats.Groups, 1)
	last := len(stats.Buckets) - 1
	require.Equal(t, "a", stats.Groups[0].Group)
	require.Positive(t, stats.Groups[0].Running[last], "the running job")
	require.Positive(t, stats.Groups[0].Waiting[last], "the waiting jobs")
}
