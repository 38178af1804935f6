package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	public "github.com/fairwayhq/fairway/store"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// partitioned starts a coordinator on three partitions: 0 and 2 in the
// home database, 1 in a database of its own (returned second).
func partitioned(t *testing.T) (*harness, *store.Store) {
	t.Helper()
	home, b := storetest.Open(t), storetest.Open(t)
	retries := 3
	h, _ := setupOn(t, home, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries,
		PartitionStores: []*public.Store{storetest.Public(home), storetest.Public(b), storetest.Public(home)}})
	return h, b
}

// TestPartitionsRunEveryJobOnce: on three partitions in two databases,
// 600 jobs of 12 groups run once each on two executors; each group's
// records are in its partition's database; every group's jobs are
// listed across the partitions, page by page; a job of each partition is
// read and cancelled through the API and seen in its database's
// fairway_live while it runs, and a workflow and a periodic task run in
// their group's partition.
func TestPartitionsRunEveryJobOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, b := partitioned(t)
	var mu sync.Mutex
	runs := map[string]int{}
	release := make(chan struct{})
	handler := func(ctx context.Context, job *executor.Job) error {
		mu.Lock()
		runs[job.Group+"/"+job.ID]++
		mu.Unlock()
		return echo(ctx, job)
	}
	h.executor("ex1", 8, map[string]executor.Handler{"echo": handler, "hold": func(ctx context.Context, _ *executor.Job) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	h.executor("ex2", 8, map[string]executor.Handler{"echo": handler})

	const jobs, groups = 600, 12
	byPart := map[int]int{}
	var subs []fairway.Submission
	for i := range jobs {
		g := fmt.Sprintf("tenant-%d", i%groups)
		byPart[partition.Of(g, 3)]++
		subs = append(subs, fairway.Submission{Group: g, ID: fmt.Sprintf("job-%04d", i), Task: "echo", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	require.Len(t, byPart, 3, "the groups fall in every partition")
	for i := 0; i < jobs; i += 100 {
		_, err := h.client.SubmitMany(ctx, subs[i:i+100])
		require.NoError(t, err)
	}
	h.allSucceed(jobs)
	mu.Lock()
	require.Len(t, runs, jobs)
	for key, n := range runs {
		require.Equal(t, 1, n, "job %s ran %d times", key, n)
	}
	mu.Unlock()

	records := func(st *store.Store) int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM fairway_job`).Scan(&n))
		return n
	}
	require.Equal(t, byPart[1], records(b), "partition 1's records in its database")
	require.Equal(t, byPart[0]+byPart[2], records(h.store), "partitions 0 and 2's in the home database")
	for _, i := range []int{0, 1, 2, 377, jobs - 1} {
		job, err := h.client.Get(ctx, subs[i].Group, subs[i].ID)
		require.NoError(t, err)
		require.Equal(t, fairway.StateSuccess, job.State)
		require.JSONEq(t, string(subs[i].Args), string(job.Result))
	}

	// Every group's jobs, page by page over the partitions.
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 100)
		got, next, err := h.client.ListPage(ctx, events.ListRequest{Limit: 70, Cursor: cursor})
		require.NoError(t, err)
		for _, j := range got {
			require.False(t, seen[j.Group+"/"+j.ID], "listed twice: %s/%s", j.Group, j.ID)
			seen[j.Group+"/"+j.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, seen, jobs)

	// A held job of each partition, seen in its database's fairway_live
	// (two partitions write the home's), then cancelled.
	held := map[string]string{}
	for p := range 3 {
		var g string
		for i := range groups {
			if partition.Of(fmt.Sprintf("tenant-%d", i), 3) == p {
				g = fmt.Sprintf("tenant-%d", i)
				break
			}
		}
		held[g] = submit(t, h, fairway.Submission{Group: g, Task: "hold"})
		require.Eventually(t, func() bool {
			job, err := h.client.Get(ctx, g, held[g])
			return err == nil && job.State == fairway.StateRunning
		}, waitTimeout, 5*time.Millisecond)
	}
	live := func(st *store.Store) map[string]string {
		rows, err := st.Pool().Query(ctx, `SELECT group_name, id FROM fairway_live`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var g, id string
			require.NoError(t, rows.Scan(&g, &id))
			out[g] = id
		}
		require.NoError(t, rows.Err())
		return out
	}
	wantLive := func(parts ...int) map[string]string {
		out := map[string]string{}
		for g, id := range held {
			for _, p := range parts {
				if partition.Of(g, 3) == p {
					out[g] = id
				}
			}
		}
		return out
	}
	require.Equal(t, wantLive(0, 2), live(h.store), "partitions 0 and 2's unfinished jobs in the home's fairway_live")
	require.Equal(t, wantLive(1), live(b))
	for g, id := range held {
		_, err := h.client.Cancel(ctx, g, id)
		require.NoError(t, err)
		evs := h.final(id)
		require.Equal(t, fairway.StateCancelled, evs[len(evs)-1].State)
	}
	require.Empty(t, live(h.store), "the jobs ended")
	close(release)

	// A workflow in a group of partition 1: the dependent after its
	// dependency.
	g1 := ""
	for i := range groups {
		if partition.Of(fmt.Sprintf("tenant-%d", i), 3) == 1 {
			g1 = fmt.Sprintf("tenant-%d", i)
		}
	}
	refs, err := h.client.SubmitWorkflow(ctx, g1, fairway.Workflow{Jobs: []fairway.WorkflowJob{
		{Ref: "a", Submission: fairway.Submission{Task: "echo"}},
		{Ref: "b", Submission: fairway.Submission{Task: "echo", DependsOn: []string{"a"}}},
	}})
	require.NoError(t, err)
	evs := h.final(refs["b"])
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)

	// A periodic task of that group (its task in the home database, its
	// jobs in partition 1's) fires, and its job runs there.
	_, err = h.client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "poll-b", Enabled: true, Task: "echo", Group: g1, Timer: "*-*-* 03:00"})
	require.NoError(t, err)
	_, err = h.client.RunPeriodicNow(ctx, "poll-b")
	require.NoError(t, err)
	// The job is stored in partition 1's database before the home's
	// transaction records the firing: its own events may come first.
	var firedJob string
	succeeded := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.Periodic == "poll-b" && ev.State == fairway.StateFired {
			firedJob = ev.JobID
		}
		if ev.State == fairway.StateSuccess {
			succeeded[ev.JobID] = true
		}
		return firedJob != ""
	})
	if !succeeded[firedJob] {
		evs = h.final(firedJob)
		require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
	}
	var inB int
	require.NoError(t, b.Pool().QueryRow(ctx, `SELECT count(*) FROM fairway_job WHERE id = $1`, firedJob).Scan(&inB))
	require.Equal(t, 1, inB, "the fired job's record in partition 1's database")

	parts, err := h.client.Partitions(ctx)
	require.NoError(t, err)
	require.Len(t, parts, 3)
	for p, part := range parts {
		require.Equal(t, p, part.Partition)
		require.NotEmpty(t, part.Leader, "partition %d led", p)
		require.Equal(t, parts[0].Leader, part.Leader, "the first's leader leads them all")
	}
	require.Equal(t, b.Where(), parts[1].Database)
}

// TestPartitionsFollowTheFirstLeader: two coordinators on three
// partitions; when the one that leads stops, the other leads every
// partition, and the jobs submitted then run.
func TestPartitionsFollowTheFirstLeader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	home, b := storetest.Open(t), storetest.Open(t)
	stores := []*public.Store{storetest.Public(home), storetest.Public(b), storetest.Public(home)}
	ns, nc := natstest.Start(t)
	start := func() *coordinator.Coordinator {
		own, err := nats.Connect(ns.ClientURL())
		require.NoError(t, err)
		t.Cleanup(own.Close)
		c, err := coordinator.New(storetest.Public(home), own, coordinator.Config{Logger: testLogger(t), PartitionStores: stores})
		require.NoError(t, err)
		require.NoError(t, c.Start(ctx))
		t.Cleanup(c.Stop)
		return c
	}
	first := start()
	second := start()
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	h := &harness{t: t, ns: ns, nc: nc, store: home, client: client, events: make(chan events.Event, 1000)}
	sub, err := client.Subscribe(ctx, events.Filter{}, func(ev events.Event) { h.events <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	h.executor("ex1", 4, map[string]executor.Handler{"echo": echo})

	// The coordinators leading the partitions ("" for a partition led by
	// none).
	leaders := func() map[string]bool {
		parts, err := client.Partitions(ctx)
		require.NoError(t, err)
		out := map[string]bool{}
		for _, p := range parts {
			if p.LeaseLeftMS > 0 {
				out[p.Leader] = true
			} else {
				out[""] = true
			}
		}
		return out
	}
	require.Eventually(t, func() bool { l := leaders(); return len(l) == 1 && !l[""] }, waitTimeout, 20*time.Millisecond, "one coordinator leads every partition")
	var before string
	for l := range leaders() {
		before = l
	}
	// Whichever leads stops.
	if first.Holder() == before {
		first.Stop()
	} else {
		second.Stop()
	}
	require.Eventually(t, func() bool {
		l := leaders()
		return len(l) == 1 && !l[before] && !l[""]
	}, 5*time.Second, 20*time.Millisecond, "the other leads every partition")
	var ids []string
	for i := range 9 {
		ids = append(ids, submit(t, h, fairway.Submission{Group: fmt.Sprintf("g%d", i), Task: "echo"}))
	}
	ended := map[string]fairway.State{}
	h.until(func(ev events.Event) bool {
		if ev.State.Final() {
			ended[ev.JobID] = ev.State
		}
		return len(ended) == len(ids)
	})
	for _, id := range ids {
		require.Equal(t, fairway.StateSuccess, ended[id], id)
	}
}

// TestPartitionsDispatchWhatAFoldMadeClaimable: an executor's dispatch
// reads each partition's eligible weight and keeps the reading a moment;
// a fold that makes a partition's jobs claimable drops it. Else a reading
// of no work kept an executor's next request from the partition until it
// ran out (here an hour; 20 ms in production, which left parked requests
// waiting out their park: a latency tail of a second on four
// partitions).
func TestPartitionsDispatchWhatAFoldMadeClaimable(t *testing.T) {
	t.Parallel()
	home, b := storetest.Open(t), storetest.Open(t)
	h, c := setupOn(t, home, coordinator.Config{PartitionStores: []*public.Store{storetest.Public(home), storetest.Public(b)}})
	c.KeepEligibleReadings(time.Hour)
	var first, second string
	for i := 0; first == "" || second == ""; i++ {
		g := fmt.Sprintf("tenant-%d", i)
		if partition.Of(g, 2) == 0 && first == "" {
			first = g
		} else if partition.Of(g, 2) == 1 && second == "" {
			second = g
		}
	}
	// The first executor's dispatch reads partition 1's weight, with no
	// work there, before it runs a job of partition 0; then it stops.
	ex := h.executor("first", 1, map[string]executor.Handler{"echo": echo})
	_, err := h.client.Submit(t.Context(), fairway.Submission{Group: first, ID: "a", Task: "echo", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	h.until(func(ev events.Event) bool { return ev.JobID == "a" && ev.State == fairway.StateSuccess })
	ex.Stop()
	// A job of partition 1 stored with no executor to hand it to: the
	// next executor's dispatch must find it.
	_, err = h.client.Submit(t.Context(), fairway.Submission{Group: second, ID: "b", Task: "echo", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	h.until(func(ev events.Event) bool { return ev.JobID == "b" && ev.State == fairway.StateWaiting })
	h.executor("second", 1, map[string]executor.Handler{"echo": echo})
	h.until(func(ev events.Event) bool { return ev.JobID == "b" && ev.State == fairway.StateSuccess })
}

// TestPartitionsGoOnWhileADatabaseIsDown: partition 1's database refuses
// every connection (its primary down); the jobs of partitions 0 and 2,
// submitted in the same messages as partition 1's, run meanwhile; once
// it is back, partition 1's run too, each once.
func TestPartitionsGoOnWhileADatabaseIsDown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, b := partitioned(t)
	var runs runCounter
	h.executor("ex", 8, map[string]executor.Handler{"echo": runs.echo})
	// Partition 1's database goes down: no new connection, the open ones
	// cut.
	name := b.Pool().Config().ConnConfig.Database
	down := func(allow bool) {
		_, err := h.store.Pool().Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS %t`, name, allow))
		require.NoError(t, err)
		if !allow {
			_, err = h.store.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name)
			require.NoError(t, err)
		}
	}
	down(false)
	t.Cleanup(func() {
		_, _ = h.store.Pool().Exec(context.Background(), fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS true`, name))
	})

	var subs []fairway.Submission
	others := map[string]bool{}
	for i := range 60 {
		g := fmt.Sprintf("tenant-%d", i%6)
		id := fmt.Sprintf("job-%02d", i)
		subs = append(subs, fairway.Submission{Group: g, ID: id, Task: "echo", Args: json.RawMessage(`{}`)})
		if partition.Of(g, 3) != 1 {
			others[id] = true
		}
	}
	require.NotEmpty(t, others)
	require.Less(t, len(others), len(subs), "some groups are in partition 1")
	_, err := h.client.SubmitMany(ctx, subs) // stored in the submit stream; the coordinator's ingest takes them in batches of messages
	require.NoError(t, err)
	done := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess && others[ev.JobID] {
			done[ev.JobID] = true
		}
		return len(done) == len(others)
	})
	down(true)
	h.succeeded(done, len(subs))
	runs.requireOnce(t, subs)
}

// TestPartitionsGoOnWhileTheHomeDatabaseIsDown: the cluster's home
// database (the executors' registry and the concurrency limits) refuses
// every connection; the partitions in another database go on, past the
// lease of those in the home, the dispatch keeping what it read of the
// instance's registration and of the limits (none can change while the
// home is down); once it is back, the home's partitions' jobs run too,
// each once. Two layouts: partition 0 in the home (the default), and
// only partition 1 there. Before, every dispatch failed once those
// readings were a few seconds old, and with partition 0 in the home,
// its leader, which led the others, gave them all up once its lease ran
// out (the cluster's lead is a NATS key now: clusterLead).
func TestPartitionsGoOnWhileTheHomeDatabaseIsDown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		home []bool // by partition: in the home database
	}{{"partition 0 in the home", []bool{true, false, true}}, {"partition 1 in the home", []bool{false, true, false}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			home, b := storetest.Open(t), storetest.Open(t)
			var stores []*public.Store
			for _, inHome := range tc.home {
				if inHome {
					stores = append(stores, storetest.Public(home))
				} else {
					stores = append(stores, storetest.Public(b))
				}
			}
			retries := 3
			h, coord := setupOn(t, home, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries, PartitionStores: stores})
			var runs runCounter
			h.executor("ex", 8, map[string]executor.Handler{"echo": runs.echo})
			// A job of every group first: the instance's registration and
			// the limits are read while the home answers.
			groups := []string{"tenant-0", "tenant-1", "tenant-2", "tenant-3", "tenant-4", "tenant-5"}
			var subs []fairway.Submission
			for _, g := range groups {
				subs = append(subs, fairway.Submission{Group: g, ID: "first-" + g, Task: "echo", Args: json.RawMessage(`{}`)})
			}
			_, err := h.client.SubmitMany(ctx, subs)
			require.NoError(t, err)
			done := map[string]bool{}
			h.succeeded(done, len(subs))

			name := home.Pool().Config().ConnConfig.Database
			down := func(allow bool) {
				_, err := b.Pool().Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS %t`, name, allow))
				require.NoError(t, err)
				if allow {
					return
				}
				// Until none is left: a connection being made as the
				// database closed may outlive one round of terminations.
				require.Eventually(t, func() bool {
					var left int
					err := b.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&left)
					return err == nil && left == 0
				}, waitTimeout, 10*time.Millisecond, "the home database's connections cut")
			}
			down(false)
			t.Cleanup(func() {
				_, _ = b.Pool().Exec(context.Background(), fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS true`, name))
			})
			// The home's partitions' leases run out; the next dispatch
			// reads the home again, and finds it down.
			require.Eventually(t, func() bool {
				for p, inHome := range tc.home {
					if inHome && coord.LeadsPartition(p) {
						return false
					}
				}
				return true
			}, waitTimeout, 10*time.Millisecond, "the home's partitions no longer led")
			coord.ExpireHomeReadings()

			others := map[string]bool{}
			var more []fairway.Submission
			for i := range 60 {
				g := groups[i%len(groups)]
				id := fmt.Sprintf("job-%02d", i)
				more = append(more, fairway.Submission{Group: g, ID: id, Task: "echo", Args: json.RawMessage(`{}`)})
				if !tc.home[partition.Of(g, 3)] {
					others[id] = true
				}
			}
			require.NotEmpty(t, others, "some groups are in the other database")
			require.Less(t, len(others), len(more), "some groups are in the home's partitions")
			_, err = h.client.SubmitMany(ctx, more)
			require.NoError(t, err)
			ran := map[string]bool{}
			h.until(func(ev events.Event) bool {
				if ev.State == fairway.StateSuccess {
					done[ev.JobID] = true
					if others[ev.JobID] {
						ran[ev.JobID] = true
					}
				}
				return len(ran) == len(others)
			})
			down(true)
			h.succeeded(done, len(subs)+len(more))
			runs.requireOnce(t, append(subs, more...))
		})
	}
}

// TestPartitionsGoOnWhileADatabaseIsFrozen: partition 1's database stops
// answering while its host still takes the connections and their bytes
// (a primary's processes frozen, as pgtest.Freezer does): the other
// partitions' jobs must still run, and once it answers again every job
// runs, once. Before, partition 1's leader held its lock over a read of
// the tail that never came back, and every dispatch request read that
// partition's weight under the lock: no partition dispatched again.
func TestPartitionsGoOnWhileADatabaseIsFrozen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	home := storetest.Open(t)
	_, bURL := storetest.OpenURL(t)
	freezer, through := pgtest.NewFreezer(t, bURL)
	b, err := store.Open(ctx, through, store.Options{})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	retries := 3
	h, _ := setupOn(t, home, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries,
		PartitionStores: []*public.Store{storetest.Public(home), storetest.Public(b), storetest.Public(home)}})
	var runs runCounter
	h.executor("ex", 8, map[string]executor.Handler{"echo": runs.echo})

	submit := func(round string) (subs []fairway.Submission, others map[string]bool) {
		others = map[string]bool{}
		for i := range 60 {
			g := fmt.Sprintf("tenant-%d", i%6)
			id := fmt.Sprintf("%s-%02d", round, i)
			subs = append(subs, fairway.Submission{Group: g, ID: id, Task: "echo", Args: json.RawMessage(`{}`)})
			if partition.Of(g, 3) != 1 {
				others[id] = true
			}
		}
		require.NotEmpty(t, others)
		require.Less(t, len(others), len(subs), "some groups are in partition 1")
		_, err := h.client.SubmitMany(ctx, subs)
		require.NoError(t, err)
		return subs, others
	}
	before, _ := submit("before")
	h.succeeded(map[string]bool{}, len(before)) // every partition runs

	freezer.Freeze()
	frozenAt := time.Now()
	frozen, others := submit("frozen")
	done := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess && others[ev.JobID] {
			done[ev.JobID] = true
		}
		return len(done) == len(others)
	})
	t.Logf("the other partitions ran their %d jobs %s after partition 1's database froze", len(others), time.Since(frozenAt).Round(time.Millisecond))
	freezer.Thaw()
	thawedAt := time.Now()
	h.succeeded(done, len(frozen))
	t.Logf("partition 1 ran its %d jobs %s after its database thawed", len(frozen)-len(others), time.Since(thawedAt).Round(time.Millisecond))
	runs.requireOnce(t, append(before, frozen...))
}

// TestPartitionsHandOutAClaimWhoseCommitWasLost: a claim in partition 1
// commits, but its connection is cut before the coordinator hears so
// (the commit waits for a synchronous standby that never answers, the
// backend is then terminated: PostgreSQL keeps what it committed
// locally), and partition 1's database then refuses connections for a
// while. The executor's next requests, answered from the other
// partitions meanwhile, must still get the jobs that claim took once the
// database is back: every job runs, once. (Before, the claim's id was
// forgotten at the next request, the leader's state not yet holding the
// claim, and its jobs stayed held by an executor that never got them:
// the bench's partition-down scenario lost a few jobs so.)
func TestPartitionsHandOutAClaimWhoseCommitWasLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, _, cut := onCutCluster(t, 3)

	// Eight jobs each in partition 1 and in the others, stored before any
	// executor asks.
	var subs []fairway.Submission
	inOne := 0
	for i := 0; inOne < 8 || len(subs)-inOne < 8; i++ {
		g := fmt.Sprintf("tenant-%d", i)
		if (partition.Of(g, 3) == 1 && inOne == 8) || (partition.Of(g, 3) != 1 && len(subs)-inOne == 8) {
			continue
		}
		if partition.Of(g, 3) == 1 {
			inOne++
		}
		subs = append(subs, fairway.Submission{Group: g, ID: "job-" + g, Task: "echo", Args: json.RawMessage(`{}`)})
	}
	_, err := h.client.SubmitMany(ctx, subs)
	require.NoError(t, err)
	h.stored(len(subs))

	// Every commit in partition 1's cluster now waits for a standby.
	cut.holdCommits()
	var runs runCounter
	h.executor("ex", 8, map[string]executor.Handler{"echo": runs.echo})
	// The executor's first request claims in every partition; partition
	// 1's claim waits at its commit, and is cut there.
	cut.atCommit(1)
	// The other partitions' jobs run meanwhile, the executor asking again
	// and again.
	done := map[string]bool{}
	h.succeeded(done, len(subs)-inOne)
	cut.back()
	h.succeeded(done, len(subs))
	runs.requireOnce(t, subs)
}

// TestPartitionsPlanAgainWhenEveryClaimAskedFailed: a dispatch request
// whose slots were all planned in partition 1 (the only one with work
// then) has its claim cut at its commit, partition 1's database then
// refusing connections; meanwhile a job came in partition 0. The request
// is answered with that job (its slots planned again over the others),
// not unavailable, and once partition 1 is back a next request gets
// what the cut claim took: both jobs handed out once. Before, the
// request was answered unavailable and the executor paused its requests
// for a second while the others had work (the bench's partition-down
// scenario, the others' stalls at the cut).
func TestPartitionsPlanAgainWhenEveryClaimAskedFailed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, _, cut := onCutCluster(t, 3)
	registerRaw(t, h, "i")
	in := func(p int) string {
		for i := 0; ; i++ {
			if g := fmt.Sprintf("tenant-%d", i); partition.Of(g, 3) == p {
				return g
			}
		}
	}
	submit := func(group, id string) {
		t.Helper()
		_, err := h.client.SubmitMany(ctx, []fairway.Submission{{Group: group, ID: id, Task: "echo", Args: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		h.stored(1)
	}
	submit(in(1), "cut")

	cut.holdCommits()
	replies := make(chan events.DispatchReply, 1)
	go func() {
		reply, _ := sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 1, Tasks: []string{"echo"}, RequestID: "r1", WaitMS: 5000})
		replies <- reply
	}()
	// Its one slot is planned in partition 1, whose claim waits at its
	// commit; a job comes in partition 0 meanwhile (the home database,
	// whose commits are not held); then the claim is cut.
	require.Eventually(t, func() bool { return cut.waitingAtCommit(1) }, waitTimeout, 5*time.Millisecond, "the claim in partition 1 waits at its commit")
	submit(in(0), "other")
	cut.atCommit(1)
	var reply events.DispatchReply
	select {
	case reply = <-replies:
	case <-time.After(waitTimeout):
		t.Fatal("the request was not answered")
	}
	require.Nil(t, reply.Error, "answered from the others, not unavailable")
	require.Len(t, reply.Jobs, 1)
	require.Equal(t, "other", reply.Jobs[0].ID)

	cut.back()
	var again []string
	require.Eventually(t, func() bool {
		r, _ := sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 1, Tasks: []string{"echo"}, RequestID: fmt.Sprintf("r%d", 2+len(again))})
		for _, j := range r.Jobs {
			again = append(again, j.ID)
		}
		return len(again) > 0
	}, waitTimeout, 50*time.Millisecond, "the cut claim's job is handed out once partition 1 is back")
	require.Equal(t, []string{"cut"}, again, "what the cut claim took, and nothing handed out twice")
}

// TestAClaimWhoseCommitWasLostIsHandedOutAfterAnOutage: on one
// partition, a claim commits but its connection is cut before the
// coordinator hears so, and the database then refuses connections for
// longer than a dispatch request is held (a restart, a failover). Every
// job must still run, once. Before, the executor's requests during the
// outage were answered empty (the leader, finding its database
// unreachable, claimed nothing), so the executor dropped the request's
// id, and the jobs that claim took stayed held by it, unstarted, for an
// hour (MaxHold): the fault suite's restart-postgres and
// postgres-failover each lost one so.
func TestAClaimWhoseCommitWasLostIsHandedOutAfterAnOutage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// One partition, on a cluster of its own: the executors' registry
	// (in the home database) stays writable while the partition's
	// commits are held.
	h, _, cut := onCutCluster(t, 1)
	var subs []fairway.Submission
	for i := range 8 {
		subs = append(subs, fairway.Submission{Group: fmt.Sprintf("tenant-%d", i), ID: fmt.Sprintf("job-%d", i), Task: "echo", Args: json.RawMessage(`{}`)})
	}
	_, err := h.client.SubmitMany(ctx, subs)
	require.NoError(t, err)
	h.stored(len(subs))

	requests := h.dispatchRequests("ex")

	cut.holdCommits()
	var runs runCounter
	h.executor("ex", 8, map[string]executor.Handler{"echo": runs.echo})
	// The executor's first request claims; the claim waits at its commit,
	// and is cut there.
	cut.atCommit(0)
	// The outage spans three more requests of the executor: more than
	// one's hold (a second), after which it was answered empty.
	awaitRequests(t, requests, 3)
	cut.back()
	done := map[string]bool{}
	h.succeeded(done, len(subs))
	runs.requireOnce(t, subs)
}

// TestPartitionsHandOutAHandOverWhoseCommitWasLost: on three
// partitions, an idle executor's parked request is handed a submission
// of partition 1 (the hand-over at ingest: the submitted and claimed rows
// in one transaction, the tail read in the same round trip), and the
// connection is cut at its commit, the database then refusing
// connections for several of the executor's requests. The job must
// still run, once. (Here the commit's answer comes before the cut, and
// the read after it fails: the leader gives the handed jobs to the
// executor's next request. A hand-over whose commit's answer is lost
// too is what journal.Leader.MayHoldClaim covers for a request sent
// again; no test makes that order happen.)
func TestPartitionsHandOutAHandOverWhoseCommitWasLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, coord, cut := onCutCluster(t, 3)
	requests := h.dispatchRequests("ex")

	var runs runCounter
	h.executor("ex", 8, map[string]executor.Handler{"echo": runs.echo})
	awaitRequests(t, requests, 1) // registered (in the home database), and asking
	require.Eventually(t, func() bool { return coord.Parked() == 1 }, waitTimeout, 5*time.Millisecond, "the idle executor's request is held")
	group := ""
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("tenant-%d", i); partition.Of(g, 3) == 1 {
			group = g
		}
	}
	subs := []fairway.Submission{{Group: group, ID: "handed", Task: "echo", Args: json.RawMessage(`{}`)}}
	cut.holdCommits()
	_, err := h.client.SubmitMany(ctx, subs)
	require.NoError(t, err)
	cut.atCommit(1)
	awaitRequests(t, requests, 3)
	cut.back()
	h.succeeded(map[string]bool{}, len(subs))
	runs.requireOnce(t, subs)
}

// dispatchRequests are executor's dispatch requests, seen as the
// coordinators see them, from now on.
func (h *harness) dispatchRequests(executor string) chan events.DispatchRequest {
	h.t.Helper()
	requests := make(chan events.DispatchRequest, 100)
	sub, err := h.nc.Subscribe("fairway.exec."+executor+".dispatch", func(msg *nats.Msg) {
		var req events.DispatchRequest
		if json.Unmarshal(msg.Data, &req) == nil {
			requests <- req
		}
	})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(h.t, h.nc.Flush())
	return requests
}

// awaitRequests drops the requests seen so far, then waits for n more.
func awaitRequests(t *testing.T, requests chan events.DispatchRequest, n int) {
	t.Helper()
	for len(requests) > 0 {
		<-requests
	}
	for i := range n {
		select {
		case <-requests:
		case <-time.After(waitTimeout):
			t.Fatalf("the executor sent %d dispatch requests of the %d awaited within %s", i, n, waitTimeout)
		}
	}
}

// onCutCluster runs a coordinator over partitions partitions (1 or 3)
// whose partition 1 (with one, 0) is in a PostgreSQL cluster of its own,
// behind a commitCutter; the others and the executors' registry are in
// the home database.
func onCutCluster(t *testing.T, partitions int) (*harness, *coordinator.Coordinator, *commitCutter) {
	t.Helper()
	home := storetest.Open(t)
	b, admin := storetest.OwnCluster(t)
	stores := []*public.Store{storetest.Public(b)}
	if partitions == 3 {
		stores = []*public.Store{storetest.Public(home), storetest.Public(b), storetest.Public(home)}
	}
	retries := 3
	// A lease that outlasts the held commits: with the 1.5 s default, a
	// renewal held at its commit let the lease run out before the
	// executor's first claim when the machine was slow (CI, once), and
	// that claim was refused rather than held at its commit.
	h, coord := setupOn(t, home, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries, PartitionStores: stores, JournalLeaseTTL: 30 * time.Second})
	return h, coord, newCommitCutter(t, admin, b.Pool().Config().ConnConfig.Database)
}

// commitCutter makes a claim's commit succeed in PostgreSQL while its
// connection is cut before the coordinator hears so (the commit waits for
// a synchronous standby that never answers; the backend is then
// terminated, and PostgreSQL keeps what it committed locally), the
// database then refusing connections until back.
type commitCutter struct {
	t    *testing.T
	adm  *pgx.Conn
	name string // the database's
}

func newCommitCutter(t *testing.T, adminURL, dbName string) *commitCutter {
	t.Helper()
	adm, err := pgx.Connect(t.Context(), adminURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close(context.Background()) })
	c := &commitCutter{t: t, adm: adm, name: dbName}
	c.exec(`SET synchronous_commit = local`) // the test's own commits do not wait
	return c
}

func (c *commitCutter) exec(sql string, args ...any) {
	c.t.Helper()
	_, err := c.adm.Exec(c.t.Context(), sql, args...)
	require.NoError(c.t, err)
}

// holdCommits makes every commit in the cluster wait for a standby.
func (c *commitCutter) holdCommits() {
	c.t.Helper()
	c.exec(`ALTER SYSTEM SET synchronous_standby_names = 'no_such_standby'`)
	c.exec(`SELECT pg_reload_conf()`)
}

// atCommit waits for an append of the partition's leader (holding the
// lease's lock shared: journal's leaseLockClass, "JRNL") to wait at its
// commit, then takes the database down: no new connection, the open ones
// (the append's among them) cut; commits no longer wait.
func (c *commitCutter) atCommit(partition int) {
	c.t.Helper()
	require.Eventually(c.t, func() bool { return c.waitingAtCommit(partition) }, waitTimeout, 5*time.Millisecond, "no append in partition %d waits at its commit", partition)
	c.exec(fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS false`, c.name))
	c.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, c.name)
	c.exec(`ALTER SYSTEM RESET synchronous_standby_names`)
	c.exec(`SELECT pg_reload_conf()`)
}

// waitingAtCommit says whether an append of the partition's leader
// (holding the lease's lock shared: journal's leaseLockClass, "JRNL")
// waits at its commit.
func (c *commitCutter) waitingAtCommit(partition int) bool {
	var n int
	err := c.adm.QueryRow(c.t.Context(), `SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
 WHERE a.wait_event = 'SyncRep' AND l.locktype = 'advisory' AND l.classid = $1 AND l.objid = $2 AND l.mode = 'ShareLock'`, 0x4a524e4c, partition).Scan(&n)
	return err == nil && n > 0
}

// back lets connections in again.
func (c *commitCutter) back() {
	c.t.Helper()
	c.exec(fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS true`, c.name))
}

// stored waits until n jobs were seen stored (waiting).
func (h *harness) stored(n int) {
	h.t.Helper()
	seen := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateWaiting {
			seen[ev.JobID] = true
		}
		return len(seen) == n
	})
}

// succeeded adds to done the jobs whose success it sees, until done
// holds n.
func (h *harness) succeeded(done map[string]bool, n int) {
	h.t.Helper()
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess {
			done[ev.JobID] = true
		}
		return len(done) == n
	})
}

// runCounter counts the runs of each job (by id) of its echo handler.
type runCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *runCounter) echo(ctx context.Context, job *executor.Job) error {
	c.mu.Lock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[job.ID]++
	c.mu.Unlock()
	return echo(ctx, job)
}

// requireOnce requires that each of subs ran once.
func (c *runCounter) requireOnce(t *testing.T, subs []fairway.Submission) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range subs {
		require.Equal(t, 1, c.runs[s.ID], "job %s", s.ID)
	}
}

// TestPartitionsCountLimitsOverTheCluster: on three partitions, a task's
// concurrency limit of two bounds its jobs over the cluster (each
// partition counting only its own let six run at once), and an
// executor's max-concurrent of one is asked of the partitions together
// (each given the request's cap handed one job apiece, and the executor
// released the extra ones back to waiting).
func TestPartitionsCountLimitsOverTheCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, _ := partitioned(t)
	_, err := h.client.SetLimit(ctx, "task", "capped", 2)
	require.NoError(t, err)

	const each, groups = 12, 12
	byPart := map[int]bool{}
	var subs []fairway.Submission
	for i := range each {
		g := fmt.Sprintf("tenant-%d", i%groups)
		byPart[partition.Of(g, 3)] = true
		subs = append(subs, fairway.Submission{Group: g, ID: fmt.Sprintf("capped-%02d", i), Task: "capped"},
			fairway.Submission{Group: g, ID: fmt.Sprintf("solo-%02d", i), Task: "solo"})
	}
	require.Len(t, byPart, 3, "the groups fall in every partition")
	_, err = h.client.SubmitMany(ctx, subs)
	require.NoError(t, err)

	gate := make(chan struct{})
	var running, peak atomic.Int32
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 12})
	ex.Handle("capped", gated(gate, &running, &peak))
	ex.Handle("solo", echo, executor.MaxConcurrent(1))
	require.NoError(t, ex.Start(ctx))

	// The solo jobs run one after the other, a dispatch request each,
	// while two capped jobs hold their slots: none of those requests gets
	// a third capped job, nor a second solo one.
	capped, solo := 0, 0
	released := func(ev events.Event) {
		if ev.State == fairway.StateWaiting && ev.PreviousState == fairway.StateScheduled {
			t.Errorf("job %s handed out and released back to waiting: %s", ev.JobID, ev.Error)
		}
	}
	h.until(func(ev events.Event) bool {
		released(ev)
		switch {
		case ev.Task == "capped" && ev.State == fairway.StateRunning:
			capped++
		case ev.Task == "solo" && ev.State == fairway.StateSuccess:
			solo++
		}
		return capped >= 2 && solo == each
	})
	require.Equal(t, int32(2), running.Load())
	limits, err := h.client.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, limits[0].Held, "the held jobs of every partition")

	close(gate)
	done := 0
	h.until(func(ev events.Event) bool {
		released(ev)
		if ev.Task == "capped" && ev.State == fairway.StateSuccess {
			done++
		}
		return done == each
	})
	require.Equal(t, int32(2), peak.Load(), "never more than the limit of two over the partitions")
}

// TestPartitionsBoundWhatAnInstanceHoldsOverTheCluster: an instance of
// five registered slots holds at most fifty jobs (maxHeldPerSlot) over
// three partitions, however often it asks without reporting: each
// partition counting only its own let it gather a hundred.
func TestPartitionsBoundWhatAnInstanceHoldsOverTheCluster(t *testing.T) {
	t.Parallel()
	h, _ := partitioned(t)
	var subs []fairway.Submission
	for i := range 100 {
		subs = append(subs, fairway.Submission{Group: fmt.Sprintf("tenant-%d", i%12), Task: "echo"})
	}
	_, err := h.client.SubmitMany(t.Context(), subs)
	require.NoError(t, err)
	h.stored(len(subs)) // before any request: an empty answer ends the loop
	registerRaw(t, h, "i")
	held := 0
	for range 40 {
		reply, _ := dispatchRequest(t, h, 0)
		require.Nil(t, reply.Error)
		if len(reply.Jobs) == 0 && held > 0 {
			break
		}
		held += len(reply.Jobs)
	}
	require.Equal(t, 50, held)
}

// TestPartitionsCountATaskRateOverTheCluster: on three partitions, a
// task's rate of 4 a second starts 4 of its jobs at once, then about 4 a
// second over the cluster: the ninth start comes at least a second after
// the first (1.25 s: five tokens refilled). Each partition counting its
// own starts let twelve start at once.
func TestPartitionsCountATaskRateOverTheCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, _ := partitioned(t)
	// Set on every partition: answered unavailable until each is led.
	require.Eventually(t, func() bool {
		_, err := h.client.SetRateLimit(ctx, "task:rated", "4/s")
		if errors.Is(err, fairway.ErrUnavailable) {
			return false
		}
		require.NoError(t, err)
		return true
	}, waitTimeout, 20*time.Millisecond, "the rate set on every partition")
	var subs []fairway.Submission
	byPart := map[int]bool{}
	for i := range 12 {
		g := fmt.Sprintf("tenant-%d", i)
		byPart[partition.Of(g, 3)] = true
		subs = append(subs, fairway.Submission{Group: g, Task: "rated"})
	}
	require.Len(t, byPart, 3, "the groups fall in every partition")
	_, err := h.client.SubmitMany(ctx, subs)
	require.NoError(t, err)

	var mu sync.Mutex
	var starts []time.Time
	h.executor("ex1", 12, map[string]executor.Handler{"rated": func(context.Context, *executor.Job) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return nil
	}})
	done := 0
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess {
			done++
		}
		return done == len(subs)
	})
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, starts, len(subs))
	slices.SortFunc(starts, time.Time.Compare)
	require.GreaterOrEqual(t, starts[8].Sub(starts[0]), time.Second,
		"the ninth start waits for five tokens of a rate of 4/s over the partitions; starts: %v", starts)
}
