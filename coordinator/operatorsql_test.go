package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// operatorQueries are the SQL blocks of docs/operations.md's "SQL for
// operators", by their first line (a comment that names the query).
func operatorQueries(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	section := string(doc)
	start := strings.Index(section, "\n## SQL for operators\n")
	require.Positive(t, start, "operations.md has no section SQL for operators")
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end > 0 {
		section = section[:end]
	}
	out := map[string]string{}
	for _, block := range strings.Split(section, "```sql\n")[1:] {
		query := block[:strings.Index(block, "```")]
		name, _, _ := strings.Cut(query, "\n")
		out[strings.TrimPrefix(name, "-- ")] = query
	}
	return out
}

// TestOperatorsSQL runs every query of operations.md's "SQL for
// operators", with jobs in every kind of state, and checks their answers
// (condition 3 of issue 31), each read right after the changes it must
// see: the unfinished jobs are what the leader writes to fairway_live_job
// when a read asks for them.
func TestOperatorsSQL(t *testing.T) {
	t.Parallel()
	queries := operatorQueries(t)
	type check func(t *testing.T, rows [][]string)
	checks := map[string]check{
		"Unfinished jobs by group and state": func(t *testing.T, rows [][]string) {
			require.Equal(t, [][]string{{"acme", "pending", "1"}, {"acme", "running", "1"}, {"acme", "waiting", "2"}, {"globex", "waiting", "1"}}, rows)
		},
		"The jobs an executor holds, longest held first": func(t *testing.T, rows [][]string) {
			require.Len(t, rows, 1)
			require.Equal(t, []string{"acme", "h1", "hold", "running"}, rows[0][:4])
		},
		"The oldest due job of each group: how long the queue has waited": func(t *testing.T, rows [][]string) {
			require.Len(t, rows, 2)
			require.Equal(t, []string{"acme", "w1"}, rows[0][:2])
			require.Equal(t, []string{"globex", "w3"}, rows[1][:2])
		},
		"One job, unfinished or ended": nil, // with an id: below
		"Jobs that ended in the last hour, by task and outcome": func(t *testing.T, rows [][]string) {
			require.Equal(t, [][]string{{"done", "success", "2"}}, rows)
		},
	}
	for name := range queries {
		_, ok := checks[name]
		require.True(t, ok, "operations.md's query %q is not run by this test", name)
	}
	require.Len(t, queries, len(checks), "a query this test runs is not in operations.md")

	st := storetest.Open(t)
	h, _ := setupOn(t, st, coordinator.Config{})
	query := queryStrings(st.Pool().Query)
	ctx := t.Context()
	_, err := h.client.SetLimit(ctx, "task", "later", 0)
	require.NoError(t, err)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	h.executor("mailer", 4, map[string]executor.Handler{
		"done":  echo,
		"later": echo,
		"hold": func(ctx context.Context, _ *executor.Job) error {
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return nil
		},
	})
	for _, sub := range []fairway.Submission{
		{Group: "acme", ID: "d1", Task: "done"}, {Group: "acme", ID: "d2", Task: "done"}, {Group: "acme", ID: "h1", Task: "hold"},
		{Group: "acme", ID: "w1", Task: "later"}, {Group: "acme", ID: "w2", Task: "later"}, {Group: "globex", ID: "w3", Task: "later"},
		{Group: "acme", ID: "p1", Task: "later", Pending: true},
	} {
		_, err := h.client.SubmitWait(ctx, sub)
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess || ev.State == fairway.StateRunning {
			seen[ev.JobID+" "+string(ev.State)] = true
		}
		return seen["d1 success"] && seen["d2 success"] && seen["h1 running"]
	})
	// Every change acknowledged before a read is in it: on the
	// journal's, the read waits for the leader to write them.
	for name, check := range checks {
		if check == nil {
			continue
		}
		rows, err := query(ctx, queries[name])
		require.NoError(t, err, name)
		check(t, rows)
	}
	one := strings.ReplaceAll(queries["One job, unfinished or ended"], "JOB-ID", "%[1]s")
	for id, want := range map[string][]string{"d1": {"acme", "d1", "success", "1"}, "h1": {"acme", "h1", "running", "1"}, "w2": {"acme", "w2", "waiting", "0"}} {
		rows, err := query(ctx, fmt.Sprintf(one, id))
		require.NoError(t, err, id)
		require.Equal(t, [][]string{want}, rows, id)
	}
	// A job submitted and one cancelled a moment before a read.
	_, err = h.client.SubmitWait(ctx, fairway.Submission{Group: "globex", ID: "w4", Task: "later"})
	require.NoError(t, err)
	_, err = h.client.Cancel(ctx, "acme", "w1")
	require.NoError(t, err)
	rows, err := query(ctx, queries["Unfinished jobs by group and state"])
	require.NoError(t, err)
	require.Equal(t, [][]string{{"acme", "pending", "1"}, {"acme", "running", "1"}, {"acme", "waiting", "1"}, {"globex", "waiting", "2"}}, rows)
}

// queryStrings runs SQL through query and returns its rows, each value
// printed ("" for NULL).
func queryStrings(query func(ctx context.Context, sql string, args ...any) (pgx.Rows, error)) func(context.Context, string) ([][]string, error) {
	return func(ctx context.Context, sql string) ([][]string, error) {
		rows, err := query(ctx, sql)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][]string
		for rows.Next() {
			values, err := rows.Values()
			if err != nil {
				return nil, err
			}
			row := make([]string, len(values))
			for i, v := range values {
				if v != nil {
					row[i] = fmt.Sprint(v)
				}
			}
			out = append(out, row)
		}
		return out, rows.Err()
	}
}
