package store_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// TestEveryEventIsAnAllowedTransition drives every statement that changes
// a job's state (insert, claim, start, each outcome, a start folded into
// its end, lost leases, an executor's restart, cancel, release, triggers,
// expiry, periodic firing) and checks that every event the store wrote is
// a transition of store.Transitions.
func TestEveryEventIsAnAllowedTransition(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	later := time.Now().Add(time.Hour)
	subAt := func(id string, edit func(*fairway.Submission)) fairway.Submission {
		sb := sub("g", fairway.PriorityHigh)
		sb.ID = id
		if edit != nil {
			edit(&sb)
		}
		return sb
	}
	insert(t, s, subAt("done", nil), subAt("retried", nil), subAt("released", nil), subAt("stopped", nil),
		subAt("folded", nil), subAt("restarted", nil), subAt("held", func(sb *fairway.Submission) { sb.Pending = true }),
		subAt("triggered", func(sb *fairway.Submission) { sb.TriggerAfter = &later }),
		subAt("expired", func(sb *fairway.Submission) { sb.Pending, sb.ExpiresAt = true, &later }),
		subAt("cancel-waiting", nil))
	insert(t, s, subAt("after-done", func(sb *fairway.Submission) { sb.DependsOn = []string{"done"} }),
		subAt("after-failed", func(sb *fairway.Submission) { sb.DependsOn = []string{"retried"} }))
	// The executor that claims below, registered: its restart releases
	// what it holds.
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "old", Slots: 10, Tasks: []string{"t"}}, 0,
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	_, err = s.InsertJobs(ctx, nil, []store.Rejection{{JobID: "refused", Group: "g", Task: "t", Err: fairway.Invalid("args", "not JSON")}})
	require.NoError(t, err)

	byID := map[string]fairway.Job{}
	take := func() {
		for _, j := range claim(t, s, "w", 10) {
			byID[j.ID] = j
		}
	}
	attempt := func(id string) store.Attempt {
		j := byID[id]
		return store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: j.Executor}
	}
	end := func(id string, kind fairway.Outcome, started *time.Time) {
		t.Helper()
		_, err := s.Complete(ctx, []store.Outcome{{Attempt: attempt(id), Kind: kind, Error: "boom", StartedAt: started}}, 0)
		require.NoError(t, err)
	}
	_, err = s.Cancel(ctx, "g", "cancel-waiting")
	require.NoError(t, err)
	take()
	for _, id := range []string{"done", "retried", "stopped"} {
		require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: attempt(id)}}))
	}
	end("done", fairway.OutcomeSuccess, nil)
	end("retried", fairway.OutcomeError, nil)
	end("released", fairway.OutcomeReleased, nil)
	_, err = s.Cancel(ctx, "g", "stopped")
	require.NoError(t, err)
	end("stopped", fairway.OutcomeCancelled, nil)
	now := time.Now()
	end("folded", fairway.OutcomeSuccess, &now)
	released, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "new", Slots: 10, Tasks: []string{"t"}}, 0,
		func(fairway.Executor) bool { return false })
	require.NoError(t, err, "restarted: its executor came back")
	require.True(t, slices.ContainsFunc(released, func(a store.Applied) bool { return a.JobID == "restarted" }), "the restart released the job it held")
	_, err = s.Cancel(ctx, "g", "restarted")
	require.NoError(t, err)

	// The stuck one again: it loses its lease, then fails for good.
	s.SetDue(t, "retried")
	take()
	s.ExpireLease(t, "retried")
	_, err = s.ExpireLeases(ctx, 100, time.Millisecond, 0)
	require.NoError(t, err)
	s.SetDue(t, "retried")
	take()
	end("retried", fairway.OutcomePermanent, nil)

	// Dependents: released by a success, cancelled by a failure, and
	// blocked again when retried by hand.
	resolved, err := s.ResolveDependents(ctx, []fairway.JobRef{{Group: "g", ID: "done"}, {Group: "g", ID: "retried"}}, nil)
	require.NoError(t, err)
	require.Len(t, resolved, 2)
	_, err = s.Retry(ctx, "g", "after-failed")
	require.NoError(t, err)

	// Retried by hand: the failed one and a cancelled one.
	_, err = s.Retry(ctx, "g", "retried")
	require.NoError(t, err)
	_, err = s.Retry(ctx, "g", "stopped")
	require.NoError(t, err)
	_, err = s.Retry(ctx, "g", "done")
	require.ErrorIs(t, err, fairway.ErrConflict, "a success is not retried")

	// Held and timed jobs.
	_, err = s.Release(ctx, "g", "held")
	require.NoError(t, err)
	s.Backdate(t, "triggered")
	_, err = s.TriggerPending(ctx, 10)
	require.NoError(t, err)
	s.Backdate(t, "expired")
	_, err = s.ExpireJobs(ctx, 10)
	require.NoError(t, err)

	// A periodic task fires, then skips while its job waits.
	t0 := time.Now().Add(-time.Minute)
	_, err = s.SavePeriodic(ctx, fairway.PeriodicTask{ID: "poll", Enabled: true, Task: "t", Group: "g", Timer: "*-*-* *:*:00", NextRun: t0, Priority: fairway.PriorityLow})
	require.NoError(t, err)
	for range 2 {
		marked, err := s.MarkDuePeriodic(ctx, "c1", time.Now(), time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, marked, 1)
		_, err = s.FirePeriodic(ctx, "c1", marked[0], fairway.NewID(), 2, t0)
		require.NoError(t, err)
	}

	seen := map[string]int{}
	_, err = s.PublishEvents(ctx, 1000, func(evs []store.Event) error {
		for _, e := range evs {
			require.True(t, store.Allowed(e.PreviousState, e.State), "job %s: %q → %q is not in store.Transitions", e.JobID, e.PreviousState, e.State)
			seen[fmt.Sprintf("%s→%s", e.PreviousState, e.State)]++
		}
		return nil
	})
	require.NoError(t, err)
	// The drive above reaches these; a statement that stopped writing its
	// event would show here.
	for _, want := range []string{"→pending", "→waiting", "→rejected", "→fired", "→skipped",
		"pending→waiting", "pending→failed", "waiting→scheduled", "waiting→cancelled",
		"scheduled→running", "scheduled→waiting", "scheduled→stuck", "scheduled→failed",
		"running→success", "running→stuck", "running→cancelled", "stuck→scheduled", "stuck→cancelled",
		"failed→waiting", "cancelled→waiting", "pending→cancelled", "cancelled→pending"} {
		require.Positive(t, seen[want], "no event %s; saw %v", want, seen)
	}
}

// TestTransitionsAreClosed: every state a transition reaches is a job
// state with its own entry (or final, or an event-only state), and a final
// state is left only by a retry by hand (failed or cancelled → waiting,
// or pending for a job with dependencies).
func TestTransitionsAreClosed(t *testing.T) {
	for from, tos := range store.Transitions {
		if from.Final() {
			require.NotEqual(t, fairway.StateSuccess, from, "a success is never retried")
			require.Equal(t, []fairway.State{fairway.StateWaiting, fairway.StatePending}, tos, "%s is final: only a retry by hand leaves it", from)
			continue
		}
		for _, to := range tos {
			_, has := store.Transitions[to]
			require.True(t, has || to.Final() || to.EventOnly(), "%s → %s: %s has no transitions of its own", from, to, to)
		}
	}
	for _, st := range fairway.States {
		_, has := store.Transitions[st]
		require.True(t, has || st.Final(), "state %s is missing from store.Transitions", st)
	}
	require.False(t, store.Allowed(fairway.StateSuccess, fairway.StateWaiting))
}

// TestEventsAreWrittenInSQLFiles: every statement that writes an event
// lives in sql/ (the one home for state changes), none inline in Go.
func TestEventsAreWrittenInSQLFiles(t *testing.T) {
	goFiles, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range goFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(data), "INSERT INTO fairway_event", "%s writes events inline: move the statement to sql/", f)
	}
	sqlFiles, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	writers := 0
	for _, f := range sqlFiles {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(data), "INSERT INTO fairway_event") {
			writers++
		}
	}
	require.GreaterOrEqual(t, writers, 8, "the statements that write events")
}

// sqlStart is how a string literal holding an SQL statement starts.
var sqlStart = regexp.MustCompile(`(?is)^\s*(SELECT|UPDATE|INSERT|DELETE|WITH|CREATE|ALTER|DROP|ANALYZE)\b`)

// TestSQLLivesInSQLFiles: the store's statements are files in sql/, read
// with go:embed, so that they can be read, diffed and explained on their
// own. The only SQL left in Go is composed with the shared column lists
// (job_columns.sql and periodicColumns): pieces of a statement joined by +.
// The public package store wraps this one and holds no SQL either; and the
// tools (internal/bench, internal/chaos) reach Fairway's tables only
// through the store's methods, so that a schema change breaks this
// package's tests, not silently a tool: they may send SQL of their own
// (CREATE DATABASE, PostgreSQL's own views) but none naming a fairway_
// table.
func TestSQLLivesInSQLFiles(t *testing.T) {
	any := func(string) bool { return true }
	require.Empty(t, inlineSQL(t, ".", any), "SQL statements inline in Go: move each to a file in sql/ and embed it")
	require.Empty(t, inlineSQL(t, "../../store", any), "SQL statements in the public store: it wraps internal/store")
	fairwayTable := regexp.MustCompile(`\bfairway_[a-z_]+\b`)
	for _, tool := range []string{"../bench", "../chaos"} {
		require.Empty(t, inlineSQL(t, tool, fairwayTable.MatchString), "%s sends SQL on Fairway's tables: give the store a method (SQL in sql/) and call it", tool)
	}
}

// inlineSQL lists the string literals of dir's Go files (not its tests)
// that hold an SQL statement that match says is one to report, leaving out
// the pieces of statements composed with +.
func inlineSQL(t *testing.T, dir string, match func(string) bool) []string {
	goFiles, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, goFiles, dir)
	fset := token.NewFileSet()
	var inline []string
	for _, f := range goFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		composed := map[*ast.BasicLit]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD {
				for _, e := range []ast.Expr{b.X, b.Y} {
					if l, ok := e.(*ast.BasicLit); ok {
						composed[l] = true
					}
				}
			}
			return true
		})
		ast.Inspect(file, func(n ast.Node) bool {
			l, ok := n.(*ast.BasicLit)
			if !ok || l.Kind != token.STRING || composed[l] {
				return true
			}
			if s, err := strconv.Unquote(l.Value); err == nil && sqlStart.MatchString(s) && match(s) {
				inline = append(inline, fset.Position(l.Pos()).String())
			}
			return true
		})
	}
	return inline
}
