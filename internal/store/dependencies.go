package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

// Dependencies (REGARDS' reliant tasks): the journal's leader resolves
// them (internal/journal); here are the check of a submission's
// depends_on against the ids taken, and the graph's reads (a job's
// ancestors and descendants, from the records and the leader's edges).

var (
	//go:embed sql/job_graph.sql
	jobGraphSQL string
	//go:embed sql/graph_dependencies.sql
	graphDependenciesSQL string
	//go:embed sql/graph_dependents.sql
	graphDependentsSQL string
	//go:embed sql/journal_existing_ids.sql
	journalExistingIdsSQL string
	//go:embed sql/index_scans_only.sql
	indexScansOnlySQL string
)

// querier is a pool or a transaction, for a statement of rows.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// UnknownDependencies checks the depends_on of subs, in tx (the
// transaction that appends them): every id must name a job whose
// submission committed in the submission's group (its id taken in
// fairway_job_id), or a submission earlier in subs (of the same group)
// that is not refused itself. It returns the refusal of each submission
// that names another, by index; nil when all are known. Batches without
// dependencies cost nothing. A submission is refused rather than
// cancelled once the leader finds no record of the job it names.
func UnknownDependencies(ctx context.Context, tx pgx.Tx, subs []fairway.Submission) (map[int]*fairway.Error, error) {
	unknown, err := unknownDependencies(ctx, tx, subs)
	if err != nil {
		return nil, fmt.Errorf("checking the jobs these depend on: %w", interpretError(err))
	}
	return unknown, nil
}

func unknownDependencies(ctx context.Context, q querier, subs []fairway.Submission) (map[int]*fairway.Error, error) {
	var groups, ids []string
	for _, sub := range subs {
		for _, dep := range sub.DependsOn {
			groups, ids = append(groups, sub.Group), append(ids, dep)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, journalExistingIdsSQL, groups, ids)
	if err != nil {
		return nil, err
	}
	found, err := collectRefs(rows)
	if err != nil {
		return nil, err
	}
	known := make(map[fairway.JobRef]bool, len(found)+len(subs))
	for _, ref := range found {
		known[ref] = true
	}
	var refused map[int]*fairway.Error
	for i, sub := range subs {
		for k, dep := range sub.DependsOn {
			if !known[fairway.JobRef{Group: sub.Group, ID: dep}] {
				if refused == nil {
					refused = map[int]*fairway.Error{}
				}
				refused[i] = &fairway.Error{Code: fairway.CodeInvalid, Field: fmt.Sprintf("depends_on[%d]", k), JobID: sub.ID,
					Message: fmt.Sprintf("job %s does not exist in group %s: a job can depend only on jobs stored before it (or, in a workflow, on another job of the workflow)", dep, sub.Group)}
				break
			}
		}
		if refused[i] == nil {
			known[fairway.JobRef{Group: sub.Group, ID: sub.ID}] = true
		}
	}
	return refused, nil
}

// Bounds of a graph (Graph): the defaults, which the coordinators use.
const (
	// GraphJobsDefault bounds the jobs of a graph.
	GraphJobsDefault = 500
	// GraphEdgesDefault bounds the edges its walk reads.
	GraphEdgesDefault = 10_000
)

// inGraphTx runs the reads of job id's graph in a transaction that scans
// indexes only (index_scans_only.sql), its error the graph's.
func (s *Store) inGraphTx(ctx context.Context, id string, read func(pgx.Tx) error) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, indexScansOnlySQL); err != nil {
			return err
		}
		return read(tx)
	})
	if err == nil || errors.Is(err, fairway.ErrNotFound) {
		return err
	}
	return fmt.Errorf("reading the graph of job %s: %w", id, err)
}

// LiveEdgesFunc gives a graph's walk on the journal engine the state's
// part of each step (journal.Leader.Edges): the walk's first call folds.
type LiveEdgesFunc func(ctx context.Context, ids []string, first bool) (journal.Edges, error)

// GraphNodes is Graph's walk on the journal engine, where the unfinished
// jobs are the leader's state's (live) and fairway_job holds the records
// of ended ones: it returns the ids of the graph's jobs, the job first,
// and the caller reads them (the unfinished ones from the state, the
// others with GraphRecords). The same bounds, the same order of visits.
func (s *Store) GraphNodes(ctx context.Context, group, id string, maxJobs, maxEdges int, live LiveEdgesFunc) (nodes []string, truncated bool, err error) {
	err = s.inGraphTx(ctx, id, func(tx pgx.Tx) error {
		nodes, truncated, err = walkGraph(ctx, tx, graphWalk{group: group, id: id, maxJobs: maxJobs, maxEdges: maxEdges, live: live})
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return nodes, truncated, nil
}

// GraphRecords reads the jobs ids of group as fairway_job holds them (a
// graph's ended jobs, on the journal engine), in submission order,
// without args or result.
func (s *Store) GraphRecords(ctx context.Context, group string, ids []string) ([]fairway.Job, error) {
	jobs, err := graphJobs(ctx, s.pool, group, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the jobs of a graph: %w", err)
	}
	return jobs, nil
}

// graphJobs reads a graph's jobs from fairway_job, without args or
// result.
func graphJobs(ctx context.Context, q querier, group string, ids []string) ([]fairway.Job, error) {
	rows, err := q.Query(ctx, jobGraphSQL, group, ids)
	if err != nil {
		return nil, err
	}
	jobs, err := collectJobs(rows)
	for i := range jobs {
		jobs[i].Args, jobs[i].Result = nil, nil
	}
	return jobs, err
}

// graphWalk is what walkGraph walks: the graph of job id of group, within
// its bounds (0: the defaults), and on the journal engine the state's
// part of each step.
type graphWalk struct {
	group, id         string
	maxJobs, maxEdges int
	live              LiveEdgesFunc
}

// walkGraph is Graph's walk: it returns the graph's job ids.
func walkGraph(ctx context.Context, q querier, w graphWalk) (nodes []string, truncated bool, err error) {
	group, id, maxJobs, maxEdges := w.group, w.id, w.maxJobs, w.maxEdges
	if maxJobs <= 0 {
		maxJobs = GraphJobsDefault
	}
	if maxEdges <= 0 {
		maxEdges = GraphEdgesDefault
	}
	visited := map[string]bool{id: true}
	nodes = []string{id}
	edges := 0
	first := true
	// edgesOf is the state's part of a step (nothing without live).
	edgesOf := func(ids []string) (journal.Edges, error) {
		if w.live == nil {
			return journal.Edges{}, nil
		}
		e, err := w.live(ctx, ids, first)
		first = false
		return e, err
	}
	// visit adds the ids not visited yet, as far as maxJobs allows, and
	// returns them.
	visit := func(ids []string) []string {
		var added []string
		for _, n := range ids {
			if visited[n] {
				continue
			}
			if len(nodes) >= maxJobs {
				truncated = true
				break
			}
			visited[n] = true
			nodes = append(nodes, n)
			added = append(added, n)
		}
		return added
	}
	// up reads the dependencies of ids (jobs visited): the next level up,
	// of unfinished jobs from the state, of the others from their rows.
	up := func(ids []string) ([]string, bool, error) {
		e, err := edgesOf(ids)
		if err != nil {
			return nil, false, err
		}
		var next, rest []string
		found := false
		for _, n := range ids {
			if !e.Live[n] {
				rest = append(rest, n)
				continue
			}
			found = true
			edges += len(e.DependsOn[n])
			next = append(next, e.DependsOn[n]...)
		}
		if len(rest) == 0 {
			return next, found, nil
		}
		rows, err := q.Query(ctx, graphDependenciesSQL, group, rest)
		if err != nil {
			return nil, false, err
		}
		var jid string
		var deps []string
		_, err = pgx.ForEachRow(rows, []any{&jid, &deps}, func() error {
			found = true
			edges += len(deps)
			next = append(next, deps...)
			return nil
		})
		return next, found, err
	}
	// down reads the dependents of ids, at most limit of the rows: the
	// next level down, the unfinished ones from the state first.
	down := func(ids []string, limit int) ([]string, error) {
		e, err := edgesOf(ids)
		if err != nil {
			return nil, err
		}
		rows, err := q.Query(ctx, graphDependentsSQL, group, ids, limit)
		if err != nil {
			return nil, err
		}
		ended, err := pgx.CollectRows(rows, pgx.RowTo[string])
		return append(e.Dependents, ended...), err
	}
	upNext, found, err := up([]string{id})
	if err != nil {
		return nil, false, err
	}
	if !found {
		// A job is always in its own graph.
		return nil, false, fairway.NotFound(id)
	}
	downNext := []string{id}
	for (len(upNext) > 0 || len(downNext) > 0) && !truncated {
		if edges > maxEdges {
			break
		}
		if level := visit(upNext); len(level) > 0 {
			if upNext, _, err = up(level); err != nil {
				return nil, false, err
			}
		} else {
			upNext = nil
		}
		if len(downNext) == 0 || truncated || edges > maxEdges {
			continue
		}
		dependents, err := down(downNext, maxEdges-edges+1)
		if err != nil {
			return nil, false, err
		}
		edges += len(dependents)
		if edges > maxEdges {
			dependents = dependents[:len(dependents)-(edges-maxEdges)]
		}
		downNext = visit(dependents)
	}
	if edges > maxEdges {
		truncated = true
	}
	return nodes, truncated, nil
}

// collectRefs reads rows of (group_name, id).
func collectRefs(rows pgx.Rows) ([]fairway.JobRef, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.JobRef, error) {
		var r fairway.JobRef
		err := row.Scan(&r.Group, &r.ID)
		return r, err
	})
}
