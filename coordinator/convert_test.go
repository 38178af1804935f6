package coordinator_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestADatabaseOfRowsMovesOntoTheJournal: a database of the row engine,
// with jobs in every unfinished state, a weight and a rate limit, is
// moved onto the journal (store.ConvertToJournal, 'fairway migrate
// --to-journal'), refused while a coordinator runs; a coordinator that
// refuses it until then, and runs it on the journal after: the waiting job runs, the
// pending one once its dependency succeeded, the one an executor held
// runs again with its attempt counted, the stuck one at its retry's time;
// the one whose cancel was requested is cancelled; ids and log lines
// stay, and the submission times too.
func TestADatabaseOfRowsMovesOntoTheJournal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t) // no engine yet
	// A database of the row engine, which no coordinator of this version
	// runs: its jobs' rows, written as that engine wrote them.
	_, err := st.Pool().Exec(ctx, `INSERT INTO fairway_engine (engine) VALUES ('rows')`)
	require.NoError(t, err)
	for i, id := range []string{"done", "waiting", "blocked", "stuck", "held", "cancelling"} {
		var deps []string
		state := "waiting"
		if id == "blocked" {
			deps, state = []string{"waiting"}, "pending"
		}
		_, err := st.Pool().Exec(ctx, `INSERT INTO fairway_job_row (id, task, group_name, args, priority, state, max_retries, run_at, submitted, depends_on)
			VALUES ($1, 'echo', 'acme', $2, 'low', $3, 3, now() + $4 * interval '1 microsecond', now() + $4 * interval '1 microsecond', $5)`,
			id, `{"id":"`+id+`"}`, state, i, deps)
		require.NoError(t, err)
	}
	_, err = st.Pool().Exec(ctx, `UPDATE fairway_job_row SET has_dependents = true WHERE id = 'waiting'`)
	require.NoError(t, err)
	sub := func(id string) fairway.Submission {
		s := fairway.Submission{Group: "acme", ID: id, Task: "echo", Args: json.RawMessage(`{"id":"` + id + `"}`)}
		require.NoError(t, s.Normalize("", "", fairway.DefaultMaxArgsSize, 3))
		return s
	}
	// Refused by a coordinator's start, with what to do.
	_, nc := natstest.Start(t)
	refused, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.ErrorContains(t, refused.Start(ctx), "fairway migrate --to-journal")
	exec := func(sql string) {
		t.Helper()
		_, err := st.Pool().Exec(ctx, sql)
		require.NoError(t, err)
	}
	// The states an engine's run leaves, set by hand.
	exec(`UPDATE fairway_job_row SET state = 'success', attempt = 1, finished = now(), result = '{"ok":1}' WHERE id = 'done'`)
	exec(`UPDATE fairway_job_row SET state = 'stuck', attempt = 1, retries = 1, run_at = now() + interval '1 second', error = 'disk full' WHERE id = 'stuck'`)
	exec(`UPDATE fairway_job_row SET state = 'running', attempt = 1, worker = 'gone', lease_until = now() + interval '1 hour', started = now() WHERE id = 'held'`)
	exec(`UPDATE fairway_job_row SET state = 'running', attempt = 1, worker = 'gone', lease_until = now() + interval '1 hour', cancel_requested = true WHERE id = 'cancelling'`)
	exec(`INSERT INTO fairway_job_log (group_name, job_id, attempt, time, level, message) VALUES ('acme', 'held', 1, now(), 'info', 'before the move')`)
	require.NoError(t, st.SetWeight(ctx, "acme", 3))
	require.NoError(t, st.SetRateLimit(ctx, "echo", "", "600/m"))
	var submitted time.Time
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT submitted FROM fairway_job_row WHERE id = 'held'`).Scan(&submitted))

	// A coordinator runs (it leads the maintenance): refused, nothing moved.
	exec(`UPDATE fairway_leader SET holder = 'another', until = now() + interval '1 minute'`)
	_, err = st.ConvertToJournal(ctx, nil)
	require.ErrorIs(t, err, store.ErrCoordinatorRunning)
	require.ErrorContains(t, err, "stop every coordinator first")
	exec(`UPDATE fairway_leader SET until = now() - interval '1 second'`)

	var moved []int
	got, err := st.ConvertToJournal(ctx, func(jobs int) { moved = append(moved, jobs) })
	require.NoError(t, err)
	require.Equal(t, []any{4, 1, 1, 1, 1}, []any{got.Jobs, got.Running, got.Cancelled, got.Weights, got.Rates})
	require.Equal(t, []int{4}, moved, "progress after each row")
	_, err = st.ConvertToJournal(ctx, nil)
	require.ErrorContains(t, err, "on the journal engine already")
	var records, ids, lines int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM fairway_job), (SELECT count(*) FROM fairway_job_id), (SELECT count(*) FROM fairway_job_log)`).Scan(&records, &ids, &lines))
	require.Equal(t, []int{2, 6, 1}, []int{records, ids, lines}, "the records of done and cancelling; every id; the log line")

	// A coordinator runs the database on the journal.
	h, _ := setupOn(t, st, coordinator.Config{Logger: testLogger(t), RetryDelay: 20 * time.Millisecond})
	job, err := h.client.Get(ctx, "acme", "cancelling")
	require.NoError(t, err)
	require.Equal(t, fairway.StateCancelled, job.State)
	held, err := h.client.Get(ctx, "acme", "held")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, held.State)
	require.Equal(t, 1, held.Attempt, "its attempt counted")
	require.True(t, submitted.Equal(held.Submitted), "its submission time kept: %s, not %s", submitted, held.Submitted)
	_, err = h.client.Get(ctx, "acme", "nope")
	require.True(t, errors.Is(err, fairway.ErrNotFound), "%v", err)
	rates, err := h.client.RateLimits(ctx)
	require.NoError(t, err)
	require.Len(t, rates, 1)
	require.Equal(t, "echo", rates[0].Task)
	var journalRows int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM fairway_journal WHERE kind IN ('weight', 'rate')`).Scan(&journalRows))
	require.Equal(t, 2, journalRows, "the weight and the rate limit are the journal's")

	h.executor("ex", 4, map[string]executor.Handler{"echo": echo})
	attempts := map[string]int{}
	for range 4 {
		evs := h.until(func(ev events.Event) bool { return ev.State == fairway.StateSuccess })
		last := evs[len(evs)-1]
		attempts[last.JobID] = last.Attempt
	}
	require.Equal(t, map[string]int{"waiting": 1, "blocked": 1, "stuck": 2, "held": 2}, attempts)
	again, err := h.client.SubmitWait(ctx, sub("done"))
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, again.State, "an id of a record is taken: the submission answers its job, and makes no second one")
}

// TestACoordinatorRecordsItsPartitions: a coordinator's start records
// the cluster's partitions in a database that recorded none (one, with no
// PartitionStores), so that 'fairway migrate --partitions' cannot later
// hash its groups anew; and it refuses a database recorded with another
// count, or one that holds partitions of a cluster whose home is
// elsewhere.
func TestACoordinatorRecordsItsPartitions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	start := func(st *store.Store) error {
		t.Helper()
		c, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
		require.NoError(t, err)
		err = c.Start(ctx)
		if err == nil {
			c.Stop()
		}
		return err
	}
	fresh := storetest.Open(t)
	require.NoError(t, start(fresh))
	rec, err := fresh.RecordCluster(ctx, store.Cluster{ID: "later", Partitions: 4, Home: true})
	require.NoError(t, err)
	require.Equal(t, 1, rec.Partitions, "recorded by the coordinator's start")
	require.NotEqual(t, "later", rec.ID)
	require.NoError(t, start(fresh), "the same count again")

	four := storetest.Open(t)
	_, err = four.RecordCluster(ctx, store.Cluster{ID: "c4", Partitions: 4, Home: true})
	require.NoError(t, err)
	require.ErrorContains(t, start(four), "database.partitions is 1, but this cluster was created with 4 partitions")

	part := storetest.Open(t)
	_, err = part.RecordCluster(ctx, store.Cluster{ID: "c2", Partitions: 1, Home: false})
	require.NoError(t, err)
	require.ErrorContains(t, start(part), "holds partitions of a cluster whose home is another database (cluster c2")
}
