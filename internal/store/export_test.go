package store

// Test hooks: move a job's clock forward without waiting.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// SetDue makes a job's run_at now (the job id in any group: tests use
// ids that are unique).
func (s *Store) SetDue(t testing.TB, id string) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET run_at = now() - interval '1 millisecond' WHERE id = $1", id)
	require.NoError(t, err)
}

// SetDueAgo makes the jobs of a group due d ago.
func (s *Store) SetDueAgo(t testing.TB, group string, d time.Duration) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET run_at = now() - $2::interval WHERE group_name = $1", group, d.String())
	require.NoError(t, err)
}

// ExpireLease makes a job's lease run out.
func (s *Store) ExpireLease(t testing.TB, id string) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET lease_until = now() - interval '1 second' WHERE id = $1", id)
	require.NoError(t, err)
}

// SilenceExecutor makes an executor's last heartbeat an hour old.
func (s *Store) SilenceExecutor(t testing.TB, appID string) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_executor SET last_heartbeat = now() - interval '1 hour' WHERE app_id = $1", appID)
	require.NoError(t, err)
}

// Backdate moves a job's trigger_after and expires_at (those that are set)
// into the past.
func (s *Store) Backdate(t testing.TB, id string) {
	_, err := s.pool.Exec(t.Context(), `UPDATE fairway_job SET trigger_after = trigger_after - interval '100 years',
		expires_at = expires_at - interval '100 years' WHERE id = $1`, id)
	require.NoError(t, err)
}

// BatchPlans returns the plans PostgreSQL chooses for the statements that
// apply executors' reports (starts, progress, outcomes) to the attempts
// given, by statement name: the plans for these values, and (names ending
// in "/generic") the generic plans a cached prepared statement may switch
// to.
func (s *Store) BatchPlans(t testing.TB, atts []Attempt) map[string]string {
	a := attemptArrays(atts)
	ids, attempts, workers, groups, instances := a.ids, a.attempts, a.executors, a.groups, a.instances
	n := len(atts)
	outcomes, texts, progress := make([]string, n), make([]string, n), make([]int32, n)
	results, started, snoozes := make([][]byte, n), make([]*time.Time, n), make([]float64, n)
	for i := range outcomes {
		outcomes[i], progress[i] = "success", 50
	}
	plans := map[string]string{}
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	suffix := ""
	explain := func(name, sql, types string, args ...any) {
		// A prepared statement, as pgx's statement cache makes: under
		// force_generic_plan, EXPLAIN EXECUTE shows its generic plan.
		_, err := conn.Exec(t.Context(), "PREPARE fw_plan ("+types+") AS "+sql)
		require.NoError(t, err)
		defer func() {
			_, err := conn.Exec(t.Context(), "DEALLOCATE fw_plan")
			require.NoError(t, err)
		}()
		// EXECUTE takes no bind parameters: the values go in as literals.
		params := make([]string, len(args))
		for i, a := range args {
			params[i] = sqlLiteral(t, a)
		}
		name += suffix
		rows, err := conn.Query(t.Context(), "EXPLAIN EXECUTE fw_plan ("+strings.Join(params, ", ")+")")
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			lines = append(lines, l)
		}
		require.NoError(t, rows.Err())
		plans[name] = strings.Join(lines, "\n")
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		_, err := conn.Exec(t.Context(), "SELECT set_config('plan_cache_mode', $1, false)", mode)
		require.NoError(t, err)
		if mode != "auto" {
			suffix = "/generic"
		}
		explain("complete", completeSQL, "text[], int[], text[], text[], jsonb[], text[], interval, timestamptz[], text[], text[], float8[]",
			ids, attempts, workers, outcomes, results, texts, interval(time.Second), started, groups, instances, snoozes)
		explain("mark_running", markRunningSQL, "text[], int[], text[], text[], text[], timestamptz[]", ids, attempts, workers, groups, instances, started)
		explain("set_progress", setProgressSQL, "text[], int[], text[], int[], text[], text[]", ids, attempts, workers, progress, groups, instances)
	}
	_, err = conn.Exec(t.Context(), "RESET plan_cache_mode")
	require.NoError(t, err)
	return plans
}

// sqlLiteral writes the values BatchPlans passes as SQL literals.
func sqlLiteral(t testing.TB, v any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	var elems []string
	switch v := v.(type) {
	case string:
		return quote(v)
	case []string:
		for _, s := range v {
			elems = append(elems, quote(s))
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::text[]"
	case []int32:
		for _, n := range v {
			elems = append(elems, fmt.Sprint(n))
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::int[]"
	case []float64:
		for _, n := range v {
			elems = append(elems, fmt.Sprint(n))
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::float8[]"
	case [][]byte: // all nil here
		return fmt.Sprintf("array_fill(NULL::jsonb, ARRAY[%d])", len(v))
	case []*time.Time: // all nil here
		return fmt.Sprintf("array_fill(NULL::timestamptz, ARRAY[%d])", len(v))
	}
	t.Fatalf("sqlLiteral: unexpected %T", v)
	return ""
}

// ExplainCountQueued returns the plan of the count of CountQueuedJobs.
func (s *Store) ExplainCountQueued(t testing.TB, group string) string {
	rows, err := s.pool.Query(t.Context(), "EXPLAIN "+countQueuedSQL, []string{group}, 1000)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

// CheckMigrationNames exposes checkMigrationNames.
var CheckMigrationNames = checkMigrationNames

// EndedAgo makes a job final in state, ended ago before now (setup for
// retention tests; the paths to a final state have their own tests).
func (s *Store) EndedAgo(t testing.TB, id string, state string, ago time.Duration) {
	s.handWritten.Store(true)
	_, err := s.pool.Exec(t.Context(), `UPDATE fairway_job SET state = $2, finished = now() - $3::interval WHERE id = $1`, id, state, interval(ago))
	require.NoError(t, err)
}

// PrunePlan is the plan of the prune statement.
func (s *Store) PrunePlan(t testing.TB) string {
	rows, err := s.pool.Query(t.Context(), "EXPLAIN "+pruneSQL, "success", "1 day", "", 1000)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// AddLog stores a log line of a job directly, and LogCount counts a job's
// lines (also of a job that is gone).
func (s *Store) AddLog(t testing.TB, group, id, message string) {
	_, err := s.pool.Exec(t.Context(), `INSERT INTO fairway_job_log (group_name, job_id, attempt, time, level, message)
		VALUES ($1, $2, 1, now(), 'info', $3)`, group, id, message)
	require.NoError(t, err)
}

// OrderRows counts a group's rows in fairway_job_order, the listing
// order (also of jobs that are gone).
func (s *Store) OrderRows(t testing.TB, group string) int {
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM fairway_job_order WHERE group_name = $1`, group).Scan(&n))
	return n
}

func (s *Store) LogCount(t testing.TB, group, id string) int {
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM fairway_job_log WHERE group_name = $1 AND job_id = $2`, group, id).Scan(&n))
	return n
}

// SetJobTimes puts a job in a state with the given times (nil: NULL): a
// history built by hand for the stats tests. run_at becomes submitted.
func (s *Store) SetJobTimes(t testing.TB, id, state string, submitted time.Time, started, finished *time.Time) {
	s.handWritten.Store(true)
	_, err := s.pool.Exec(t.Context(), `UPDATE fairway_job SET state = $2, submitted = $3, run_at = $3, started = $4, finished = $5 WHERE id = $1`,
		id, state, submitted, started, finished)
	require.NoError(t, err)
}

// SpreadHistory gives every job a history within the last hour: finished
// ones (the first share of them, by id) end at a time spread over the last 50 minutes
// after a run of up to 2 s; the rest wait, due at a time spread over them.
func (s *Store) SpreadHistory(t testing.TB, finished float64) {
	s.handWritten.Store(true)
	_, err := s.pool.Exec(t.Context(), `
		WITH r AS (SELECT group_name, id, row_number() OVER (ORDER BY id) AS n, count(*) OVER () AS total FROM fairway_job)
		UPDATE fairway_job j SET
		       submitted = now() - (r.n % 3000) * interval '1 second' - interval '3 seconds',
		       run_at = now() - (r.n % 3000) * interval '1 second' - interval '3 seconds',
		       started = CASE WHEN r.n <= r.total * $1::float8 THEN now() - (r.n % 3000) * interval '1 second' - interval '2 seconds' END,
		       finished = CASE WHEN r.n <= r.total * $1::float8 THEN now() - (r.n % 3000) * interval '1 second' - (r.n % 2000) * interval '1 millisecond' END,
		       state = CASE WHEN r.n <= r.total * $1::float8 THEN (CASE WHEN r.n % 10 = 0 THEN 'failed' ELSE 'success' END) ELSE 'waiting' END
		  FROM r WHERE j.group_name = r.group_name AND j.id = r.id`, finished)
	require.NoError(t, err)
	_, err = s.pool.Exec(t.Context(), "ANALYZE fairway_job")
	require.NoError(t, err)
}

// HeldNow counts the jobs executors hold now (scheduled or running), by
// "task:<task>" and "group:<group>", in one snapshot. Safe to call from
// several goroutines.
func (s *Store) HeldNow(t testing.TB) map[string]int {
	rows, err := s.pool.Query(context.Background(),
		`SELECT 'task:' || task, count(*) FROM fairway_job WHERE state IN ('scheduled', 'running') GROUP BY task
		 UNION ALL
		 SELECT 'group:' || group_name, count(*) FROM fairway_job WHERE state IN ('scheduled', 'running') GROUP BY group_name`)
	if err != nil {
		t.Error(err)
		return nil
	}
	out := map[string]int{}
	var key string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&key, &n}, func() error { out[key] = n; return nil }); err != nil {
		t.Error(err)
	}
	return out
}

// HoldRowChange changes a job's row (set: an UPDATE's SET list) in a
// transaction left open, so that statements writing the row wait for it;
// the returned function commits it.
func (s *Store) HoldRowChange(t testing.TB, group, id, set string) (commit func()) {
	tx, err := s.pool.Begin(t.Context())
	require.NoError(t, err)
	tag, err := tx.Exec(t.Context(), `UPDATE fairway_job SET `+set+` WHERE group_name = $1 AND id = $2`, group, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	return func() { require.NoError(t, tx.Commit(context.WithoutCancel(t.Context()))) }
}

// AwaitLockWaiter returns once a statement of this database waits for a
// row lock.
func (s *Store) AwaitLockWaiter(t testing.TB) {
	require.Eventually(t, func() bool {
		// No require here: the condition runs on a goroutine of its own.
		var n int
		err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, time.Millisecond)
}

// HoldRegistration does what a registration of a new instance of the
// executor appID does to the rows others read (the fairness row's count,
// the executor's instance), in a transaction left open; the returned
// function commits it.
func (s *Store) HoldRegistration(t testing.TB, appID, instance string) (commit func()) {
	tx, err := s.pool.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), executorClaimsWaitSQL)
	require.NoError(t, err)
	tag, err := tx.Exec(t.Context(), `UPDATE fairway_executor SET instance = $2 WHERE app_id = $1`, appID, instance)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	return func() { require.NoError(t, tx.Commit(context.WithoutCancel(t.Context()))) }
}

// ClaimMarkPlan returns the generic plan of the claim's marking statement
// (claim_mark.sql) under the settings a claim gives it (claim_lock.sql's,
// then claim_unpin.sql's), as pgx's statement cache makes it on the
// table as it is now.
func (s *Store) ClaimMarkPlan(t testing.TB) string {
	tx, err := s.pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(t.Context())) }()
	for _, sql := range []string{claimPinSQL, claimUnpinSQL} {
		_, err := tx.Exec(t.Context(), sql)
		require.NoError(t, err)
	}
	_, err = tx.Exec(t.Context(), "PREPARE fw_mark (text[], text[], text, interval, text, text, text[]) AS "+claimMarkSQL)
	require.NoError(t, err)
	rows, err := tx.Query(t.Context(), "EXPLAIN EXECUTE fw_mark (ARRAY['j1'], ARRAY['waiting'], 'w', '1 minute', '', '', ARRAY['g'])")
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), "DEALLOCATE fw_mark")
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// List returns jobs newest first, with their args and result: at most
// Limit of them, all in memory (the API serves ListJobs, which streams).
func (s *Store) List(ctx context.Context, p ListParams) ([]fairway.Job, error) {
	p.Full = true
	var jobs []fairway.Job
	_, err := s.ListJobs(ctx, p, func(j fairway.Job) bool {
		jobs = append(jobs, j)
		return true
	})
	if err == nil {
		err = s.MarkNoExecutor(ctx, jobs)
	}
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", interpretError(err))
	}
	return jobs, nil
}

// Logs returns the log lines of the job id of group, oldest first, all in
// memory. A job of another group is not found (the API serves LogLines,
// which pages and caps each message).
func (s *Store) Logs(ctx context.Context, group, id string) ([]fairway.LogLine, error) {
	if _, err := s.Get(ctx, group, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, jobLogsSQL, id, group)
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, interpretError(err))
	}
	lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.LogLine, error) {
		var l fairway.LogLine
		err := row.Scan(&l.Group, &l.JobID, &l.Attempt, &l.Time, &l.Level, &l.Message)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, interpretError(err))
	}
	return lines, nil
}

// StartedAgo marks a job running, started d ago.
// ScheduledAgo makes a held job's hand-over d ago.
func (s *Store) ScheduledAgo(t testing.TB, id string, d time.Duration) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET scheduled_at = now() - $2::interval WHERE id = $1 AND state = 'scheduled'", id, d)
	require.NoError(t, err)
}

func (s *Store) StartedAgo(t testing.TB, id string, d time.Duration) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET state = 'running', started = now() - $2::interval WHERE id = $1", id, d)
	require.NoError(t, err)
}

// AgeRateBuckets moves every rate bucket's count d into the past, as if d
// had passed since.
func (s *Store) AgeRateBuckets(t testing.TB, d time.Duration) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_rate_bucket SET at = at - $1::interval", d)
	require.NoError(t, err)
}

// ExtendLeases is extendLeases, which Heartbeat calls.
func (s *Store) ExtendLeases(ctx context.Context, worker, instance string, jobs []fairway.JobRef, lease time.Duration) error {
	return s.extendLeases(ctx, worker, instance, jobs, lease)
}
