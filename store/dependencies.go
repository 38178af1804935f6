package store

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Dependencies (REGARDS' reliant tasks). A job submitted with depends_on
// is stored pending and blocked: its depends_on column names the jobs it
// waits for, and nothing else records the edges. ResolveDependents
// releases it when the last of them has succeeded, or cancels it, naming
// the dependency, when one of them failed or was cancelled. The resolution
// runs after the ends commit, as a statement of its own (see
// resolve_dependents.sql for why that is race-free); ResolveBlocked is
// the sweep that catches an end whose follow-up was lost (a coordinator
// that died in between).

var (
	//go:embed sql/resolve_dependents.sql
	resolveDependentsSQL string
	//go:embed sql/blocked_jobs.sql
	blockedJobsSQL string
	//go:embed sql/job_graph.sql
	jobGraphSQL string
	//go:embed sql/mark_dependencies.sql
	markDependenciesSQL string
)

// execer is what markDependencies needs of a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// markDependencies sets has_dependents on the jobs that the stored
// submissions (those of subs whose out entry has no error) depend on, so
// that their completions resolve them. Batches without dependencies cost
// nothing.
func markDependencies(ctx context.Context, q execer, subs []fairway.Submission, out []Inserted) error {
	var groups, ids []string
	for i, sub := range subs {
		if out[i].Err != nil {
			continue
		}
		for _, dep := range sub.DependsOn {
			groups, ids = append(groups, sub.Group), append(ids, dep)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, markDependenciesSQL, groups, ids)
	return err
}

// unknownDependencies checks the depends_on of subs: every id must name a
// job stored in the submission's group, or a submission earlier in subs
// (of the same group) that is not refused itself. It returns the refusal
// of each submission that names another, by index; nil when all are known.
// Batches without dependencies cost nothing.
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
	rows, err := q.Query(ctx, insertExistingIdsSQL, groups, ids)
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

// ResolveDependents releases or cancels the blocked jobs that depend on
// the jobs in ended (which reached a final state), and the blocked jobs
// among candidates (checked themselves: jobs just stored or retried).
// Jobs whose dependencies have not all ended are left as they are. It
// returns the jobs it changed: waiting ones (due at their run_at) and
// cancelled ones, whose own dependents the caller resolves in turn.
func (s *Store) ResolveDependents(ctx context.Context, ended, candidates []fairway.JobRef) ([]Applied, error) {
	if len(ended) == 0 && len(candidates) == 0 {
		return nil, nil
	}
	eg, ei := refArrays(ended)
	cg, ci := refArrays(candidates)
	rows, err := s.pool.Query(ctx, resolveDependentsSQL, eg, ei, cg, ci)
	if err != nil {
		return nil, fmt.Errorf("resolving the dependents of %d jobs: %w", len(ended)+len(candidates), interpretError(err))
	}
	applied, err := collectApplied(rows)
	if err != nil {
		return nil, fmt.Errorf("resolving the dependents of %d jobs: %w", len(ended)+len(candidates), interpretError(err))
	}
	return applied, nil
}

// ResolveBlocked resolves up to limit blocked jobs, in key order after the
// job after ({"", ""}: from the start). It returns the jobs it changed and
// the key to go on from; the zero key when it reached the end.
func (s *Store) ResolveBlocked(ctx context.Context, after fairway.JobRef, limit int) ([]Applied, fairway.JobRef, error) {
	rows, err := s.pool.Query(ctx, blockedJobsSQL, after.Group, after.ID, limit)
	if err != nil {
		return nil, after, fmt.Errorf("reading blocked jobs: %w", interpretError(err))
	}
	blocked, err := collectRefs(rows)
	if err != nil {
		return nil, after, fmt.Errorf("reading blocked jobs: %w", interpretError(err))
	}
	var next fairway.JobRef
	if len(blocked) == limit {
		next = blocked[len(blocked)-1]
	}
	applied, err := s.ResolveDependents(ctx, nil, blocked)
	return applied, next, err
}

func refArrays(refs []fairway.JobRef) (groups, ids []string) {
	groups, ids = make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		groups[i], ids[i] = r.Group, r.ID
	}
	return groups, ids
}

// InsertWorkflow stores a workflow's jobs atomically: all of them, or,
// when one is refused, none (the error names it). The submissions are
// normalized already, their depends_on naming ids (a workflow's local
// references resolved to its jobs' ids, see fairway.Workflow) and in an
// order where each comes after the jobs it depends on. Jobs whose ids
// their group uses already are not stored again (an idempotent resubmit).
// The jobs with dependencies are stored pending: the caller resolves them
// (ResolveDependents) after this returns.
func (s *Store) InsertWorkflow(ctx context.Context, subs []fairway.Submission) ([]Inserted, error) {
	var out []Inserted
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		unknown, err := unknownDependencies(ctx, tx, subs)
		if err != nil {
			return err
		}
		for i := range subs {
			if unknown[i] != nil {
				return unknown[i]
			}
		}
		if out, _, err = insertJobs(ctx, tx, subs, nil, false, nil); err != nil {
			return err
		}
		for _, r := range out {
			if r.Err != nil {
				r.Err.JobID = r.ID
				return r.Err
			}
		}
		return markDependencies(ctx, tx, subs, out)
	})
	if err != nil {
		return nil, fmt.Errorf("storing a workflow of %d jobs: %w", len(subs), interpretError(err))
	}
	return out, nil
}

// Graph returns the job id of group with the jobs it depends on and the
// jobs that depend on it, directly or not (its ancestors and descendants,
// not their other relatives), at most limit jobs, without args or result.
// A job of another group is not found.
func (s *Store) Graph(ctx context.Context, group, id string, limit int) ([]fairway.Job, error) {
	rows, err := s.pool.Query(ctx, jobGraphSQL, group, id, limit)
	if err != nil {
		return nil, fmt.Errorf("reading the graph of job %s: %w", id, interpretError(err))
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("reading the graph of job %s: %w", id, interpretError(err))
	}
	if len(jobs) == 0 {
		// A job is always in its own graph.
		return nil, fairway.NotFound(id)
	}
	for i := range jobs {
		jobs[i].Args, jobs[i].Result = nil, nil
	}
	return jobs, nil
}
