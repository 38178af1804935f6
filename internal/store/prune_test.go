package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// TestPruneReadsWhatItPrunes: a prune reads the batches of records it
// takes records from, through its state's index of end times, and not
// every expired batch (it read them all, and the successes pruned after
// a day walked the failed jobs kept for a month); it frees the pruned
// jobs' ids and log lines one index probe each, not by reading every id
// kept.
func TestPruneReadsWhatItPrunes(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	exec := execer(t, s)
	// 20,000 batches of one record each, ended two days ago or more, one
	// in ten a success.
	exec(`INSERT INTO fairway_record (finished, keys, groups, s_groups, s_tasks, s_states, s_started, s_due, jobs)
SELECT now() - interval '2 days' - i * interval '1 second', '{0}', '{g}', '{g}', '{t}',
       ARRAY[CASE WHEN i % 10 = 0 THEN 'success' ELSE 'failed' END], '{0}', '{0}',
       json_build_array(json_build_object('group_name', 'g', 'id', 'j' || i))
  FROM generate_series(1, 20000) AS i`)
	exec(`INSERT INTO fairway_job_id (group_name, id) SELECT 'g', 'j' || i FROM generate_series(1, 300000) AS i`)
	exec(`INSERT INTO fairway_job_log (group_name, job_id, attempt, time, level, message)
SELECT 'g', 'j' || i, 1, now(), 'info', 'line' FROM generate_series(1, 300000) AS i`)
	exec(`ANALYZE fairway_record, fairway_job_id, fairway_job_log`)

	pruned, reads := s.PruneReads(t, fairway.StateSuccess, 24*time.Hour, 100)
	require.Equal(t, 100, pruned)
	t.Logf("rows read (sequentially, through an index): %v", reads)
	require.Zero(t, reads["fairway_record"][0], "no batch read by a sequential scan")
	require.LessOrEqual(t, reads["fairway_record"][1], int64(4*100+16),
		"a few index reads for each of the 100 batches taken, not the 20,000 expired")
	for _, table := range []string{"fairway_job_id", "fairway_job_log"} {
		require.Zero(t, reads[table][0], "%s: not read by a sequential scan", table)
		require.LessOrEqual(t, reads[table][1], int64(100), "%s: one probe a pruned job", table)
	}
}

// TestPruneTakesRecordsOutOfTheirBatches: a batch holds records of every
// outcome; pruning one outcome takes its records out (the batch written
// again with the others, their order kept), frees their ids and drops
// their log lines, in rounds of the limit; a batch left empty goes, and
// the records still kept read as before.
func TestPruneTakesRecordsOutOfTheirBatches(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	exec := execer(t, s)
	// 2,500 jobs that ended two days ago, one in five failed: three
	// batches (of 1,000, 1,000 and 500), as the row engine's rows move.
	exec(`INSERT INTO fairway_job_row (id, task, group_name, priority, state, max_retries, attempt, run_at, submitted, started, finished, error)
SELECT 'j' || i, 't', 'g', 'low', CASE WHEN i % 5 = 0 THEN 'failed' ELSE 'success' END, 3, 1, now(), now(), now(),
       now() - interval '2 days' + i * interval '1 millisecond', CASE WHEN i % 5 = 0 THEN 'boom' END
  FROM generate_series(1, 2500) AS i`)
	exec(`SELECT fairway_move_job_rows()`)
	exec(`INSERT INTO fairway_job_log (group_name, job_id, attempt, time, level, message) VALUES ('g', 'j5', 1, now(), 'info', 'a'), ('g', 'j6', 1, now(), 'info', 'b')`)
	count := func(sql string) (n int) {
		t.Helper()
		require.NoError(t, s.Pool().QueryRow(ctx, sql).Scan(&n))
		return n
	}
	require.Equal(t, 3, count(`SELECT count(*) FROM fairway_record`))
	require.Equal(t, 2500, count(`SELECT count(*) FROM fairway_job_id`))

	total := 0
	for {
		n, err := s.Prune(ctx, fairway.StateFailed, time.Hour, "", 200)
		require.NoError(t, err)
		total += n
		if n < 200 {
			break
		}
	}
	require.Equal(t, 500, total, "every failed job, 200 at a time")
	require.Equal(t, 0, count(`SELECT count(*) FROM fairway_job WHERE state = 'failed'`))
	require.Equal(t, 2000, count(`SELECT count(*) FROM fairway_job WHERE state = 'success'`))
	require.Equal(t, 2000, count(`SELECT count(*) FROM fairway_job_id`), "the failed jobs' ids are free")
	require.Equal(t, 1, count(`SELECT count(*) FROM fairway_job_log`), "j5's line went with it, j6's stays")
	require.Equal(t, 0, count(`SELECT count(*) FROM (SELECT seq FROM fairway_job GROUP BY seq HAVING count(*) > 1) d`), "each record keeps its place")
	require.Equal(t, 0, count(`SELECT count(*) FROM fairway_record_stat WHERE state = 'failed'`), "the stats count no pruned job")
	require.Equal(t, 2000, count(`SELECT count(*) FROM fairway_record_stat WHERE state = 'success'`))
	require.Equal(t, 0, count(`SELECT count(*) FROM fairway_record WHERE cardinality(keys) <> json_array_length(jobs)
   OR cardinality(s_states) <> json_array_length(jobs) OR cardinality(s_finished) <> json_array_length(jobs)`),
		"a batch written again keeps its arrays in line with its records")
	for _, id := range []string{"j1", "j999", "j1001", "j2499"} {
		job, err := s.Get(ctx, "g", id)
		require.NoError(t, err, "%s, found at its new place in its batch", id)
		require.Equal(t, id, job.ID)
	}
	job, err := s.Get(ctx, "g", "j6")
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, job.State, "a kept record reads as before")
	_, err = s.Get(ctx, "g", "j5")
	require.ErrorIs(t, err, fairway.ErrNotFound)

	n, err := s.Prune(ctx, fairway.StateSuccess, time.Hour, "", 5000)
	require.NoError(t, err)
	require.Equal(t, 2000, n)
	require.Equal(t, 0, count(`SELECT count(*) FROM fairway_record`), "the emptied batches went")
}

// TestMigration028PutsTheArraysBackInLine: a batch that a prune or a retry
// by hand wrote again before migration 028 kept the keys and stats of the
// records it lost; the migration writes its arrays from its records, so
// that the stats count only these and a record is found at its place.
// (Applied again here, on a batch made as such a prune left it.)
func TestMigration028PutsTheArraysBackInLine(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	exec := execer(t, s)
	exec(`INSERT INTO fairway_job_row (id, task, group_name, priority, state, max_retries, attempt, run_at, submitted, started, finished)
SELECT 'j' || i, 't', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END, 'low', CASE WHEN i % 3 = 0 THEN 'failed' ELSE 'success' END,
       3, 1, now(), now(), now(), now() - interval '1 day' + i * interval '1 millisecond'
  FROM generate_series(1, 10) AS i`)
	exec(`SELECT fairway_move_job_rows()`)
	// What migration 027's prune did to the failed jobs j3, j6, j9: out of
	// the records alone.
	exec(`UPDATE fairway_record SET jobs = (SELECT json_agg(e ORDER BY o) FROM json_array_elements(jobs) WITH ORDINALITY AS x (e, o)
 WHERE e->>'state' <> 'failed')`)
	exec(`DELETE FROM fairway_migration WHERE version = 28`)
	applied, err := s.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{28}, applied)

	var states, groups []string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT s_states, groups FROM fairway_record`).Scan(&states, &groups))
	require.Equal(t, []string{"success", "success", "success", "success", "success", "success", "success"}, states)
	require.ElementsMatch(t, []string{"even", "odd"}, groups)
	for _, id := range []string{"j1", "j5", "j10"} {
		group := map[bool]string{true: "even", false: "odd"}[id == "j10"]
		job, err := s.Get(ctx, group, id)
		require.NoError(t, err, "%s is found at its place", id)
		require.Equal(t, id, job.ID)
	}
}

// execer runs statements on s's database, failing t on an error.
func execer(t *testing.T, s *store.Store) func(sql string) {
	return func(sql string) {
		t.Helper()
		_, err := s.Pool().Exec(t.Context(), sql)
		require.NoError(t, err)
	}
}
