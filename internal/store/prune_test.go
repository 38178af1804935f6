package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestPruneUsesItsIndex: the prune statement finds the batches of records
// old enough through their index of end times, not by reading every
// batch.
func TestPruneUsesItsIndex(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	_, err := s.Pool().Exec(t.Context(), `INSERT INTO fairway_record (finished, keys, groups, s_groups, s_tasks, s_states, s_started, s_due, jobs)
SELECT now() - i * interval '1 second', '{}', '{g}', '{}', '{}', '{}', '{}', '{}', '[]' FROM generate_series(1, 5000) AS i`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(t.Context(), `ANALYZE fairway_record`)
	require.NoError(t, err)
	require.Contains(t, s.PrunePlan(t), "fairway_record_finished")
}

// TestPruneTakesRecordsOutOfTheirBatches: a batch holds records of every
// outcome; pruning one outcome takes its records out (the batch written
// again with the others, their order kept), frees their ids and drops
// their log lines, in rounds of the limit; a batch left empty goes, and
// the records still kept read as before.
func TestPruneTakesRecordsOutOfTheirBatches(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	exec := func(sql string) {
		t.Helper()
		_, err := s.Pool().Exec(ctx, sql)
		require.NoError(t, err)
	}
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
