package store

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// DependencyPlans returns the plans of the resolution's and the graph's
// statements, by file, for jobs of group (ids: blocked ones; ended: jobs
// they depend on), after VACUUM ANALYZE (which also empties the pending
// list of the GIN index, as autovacuum does), each as the store runs it.
func (s *Store) DependencyPlans(t testing.TB, group string, ids, ended []string) map[string]string {
	ctx := t.Context()
	_, err := s.pool.Exec(ctx, "VACUUM ANALYZE fairway_job")
	require.NoError(t, err)
	groups := make([]string, len(ids))
	for i := range groups {
		groups[i] = group
	}
	statements := map[string][]any{
		"resolve_dependents.sql": {resolveDependentsSQL, groups, ids, ResolveGroupDepsDefault, ResolveDepsDefault},
		"blocked_dependents.sql": {blockedDependentsSQL, group, ended, DependentsLimitDefault + 1},
		"blocked_jobs.sql":       {blockedJobsSQL, []string{group}, []string{""}, 64},
		"blocked_groups.sql":     {blockedGroupsSQL},
		"graph_dependencies.sql": {graphDependenciesSQL, group, ids},
		"graph_dependents.sql":   {graphDependentsSQL, group, ended, GraphEdgesDefault + 1},
		"job_graph.sql":          {jobGraphSQL, group, ids},
	}
	// As the store runs them: these in a transaction that may use indexes
	// only (index_scans_only.sql).
	indexOnly := map[string]bool{"blocked_dependents.sql": true, "graph_dependencies.sql": true, "graph_dependents.sql": true, "job_graph.sql": true}
	plans := map[string]string{}
	for file, st := range statements {
		tx, err := s.pool.Begin(ctx)
		require.NoError(t, err)
		if indexOnly[file] {
			_, err := tx.Exec(ctx, indexScansOnlySQL)
			require.NoError(t, err)
		}
		// EXPLAIN of a statement that writes plans it without running it.
		rows, err := tx.Query(ctx, "EXPLAIN "+st[0].(string), st[1:]...)
		require.NoError(t, err, file)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, file)
		require.NoError(t, tx.Rollback(ctx))
		plans[file] = strings.Join(lines, "\n")
	}
	return plans
}
