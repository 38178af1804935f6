package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Dependencies (REGARDS' reliant tasks). A job submitted with depends_on
// is stored pending and blocked: its depends_on column names the jobs it
// waits for, and nothing else records the edges. ResolveCandidates
// releases it when the last of them has succeeded, or cancels it, naming
// the dependency, when one of them failed or was cancelled. The resolution
// runs after the ends commit, as statements of their own (see
// resolve_dependents.sql for why that is race-free), each of bounded work
// whatever the jobs' shapes, since a tenant sets them: BlockedDependents
// finds the blocked jobs that name ended jobs (a bounded number each),
// ResolveCandidates checks candidates (a bounded number of dependency
// entries), and BlockedJobs reads a group's blocked jobs a slice at a
// time, for the sweep that catches an end whose follow-up was lost (a
// coordinator that died in between) and for an ended job with too many
// dependents to read at once. The coordinators call them a slice per
// group in turn (coordinator/maint_dependents.go).

var (
	//go:embed sql/resolve_dependents.sql
	resolveDependentsSQL string
	//go:embed sql/blocked_dependents.sql
	blockedDependentsSQL string
	//go:embed sql/blocked_jobs.sql
	blockedJobsSQL string
	//go:embed sql/blocked_groups.sql
	blockedGroupsSQL string
	//go:embed sql/job_graph.sql
	jobGraphSQL string
	//go:embed sql/graph_dependencies.sql
	graphDependenciesSQL string
	//go:embed sql/graph_dependents.sql
	graphDependentsSQL string
	//go:embed sql/journal_existing_ids.sql
	journalExistingIdsSQL string
	//go:embed sql/mark_dependencies.sql
	markDependenciesSQL string
	//go:embed sql/index_scans_only.sql
	indexScansOnlySQL string
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
	return unknownDependenciesIn(ctx, q, subs, insertExistingIdsSQL)
}

// UnknownDependenciesOnJournal is unknownDependencies on the journal
// engine, in tx (the transaction that appends subs): an id is known when
// a committed submission took it (fairway_job_id). The journal refuses
// such a submission as the row engine does, instead of cancelling it
// once the leader finds no record of the job it names.
func UnknownDependenciesOnJournal(ctx context.Context, tx pgx.Tx, subs []fairway.Submission) (map[int]*fairway.Error, error) {
	unknown, err := unknownDependenciesIn(ctx, tx, subs, journalExistingIdsSQL)
	if err != nil {
		return nil, fmt.Errorf("checking the jobs these depend on: %w", interpretError(err))
	}
	return unknown, nil
}

// unknownDependenciesIn is unknownDependencies, the stored ids found by
// existing (insertExistingIdsSQL, journalExistingIdsSQL).
func unknownDependenciesIn(ctx context.Context, q querier, subs []fairway.Submission, existing string) (map[int]*fairway.Error, error) {
	var groups, ids []string
	for _, sub := range subs {
		for _, dep := range sub.DependsOn {
			groups, ids = append(groups, sub.Group), append(ids, dep)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, existing, groups, ids)
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

// Bounds of the resolution's statements (ResolveBounds), and of the
// dependents read for one ended job (BlockedDependents): the defaults,
// which the coordinators use.
const (
	// ResolveJobsDefault bounds the candidates one statement takes.
	ResolveJobsDefault = 1024
	// ResolveGroupDepsDefault bounds the dependency entries one group's
	// candidates may count in one statement.
	ResolveGroupDepsDefault = 1024
	// ResolveDepsDefault bounds those all candidates of a statement may
	// count.
	ResolveDepsDefault = 4096
	// DependentsLimitDefault bounds the dependents read for one ended job:
	// a job with more has its group swept instead.
	DependentsLimitDefault = 2000
)

// ResolveBounds bounds the work of one resolution statement
// (ResolveCandidates). Each dependency entry of a job checked is a key
// look-up, so the bounds count entries: a blocked candidate is taken
// while its group's candidates taken before it count fewer than GroupDeps
// entries and all taken before it fewer than Deps (a group's first and
// the statement's first always are). A statement thus checks at most
// Deps + MaxDependencies - 1 entries, a group's slice of it at most
// GroupDeps + MaxDependencies - 1, and the caller bounds the candidates.
type ResolveBounds struct {
	GroupDeps int
	Deps      int
}

func (b ResolveBounds) withDefaults() ResolveBounds {
	if b.GroupDeps <= 0 {
		b.GroupDeps = ResolveGroupDepsDefault
	}
	if b.Deps <= 0 {
		b.Deps = ResolveDepsDefault
	}
	return b
}

// ResolveCandidates resolves the blocked jobs (pending, with depends_on)
// among cands, taken in order as far as b allows: a job all of whose
// dependencies succeeded is released (waiting, due at its run_at), a job
// one of whose dependencies failed, was cancelled or does not exist is
// cancelled, naming it; a job whose dependencies have not all ended stays
// blocked. Candidates that are not blocked are passed over. It returns the
// jobs it changed (cancelled ones' own dependents are the caller's to
// resolve in turn) and the blocked candidates it left, in order, for the
// caller to pass again: never all of them, so that a loop that passes the
// rest again ends. Run it after the ends it follows committed: it sees
// every dependency that ended before.
func (s *Store) ResolveCandidates(ctx context.Context, cands []fairway.JobRef, b ResolveBounds) ([]Applied, []fairway.JobRef, error) {
	if len(cands) == 0 {
		return nil, nil, nil
	}
	b = b.withDefaults()
	groups, ids := refArrays(cands)
	rows, err := s.pool.Query(ctx, resolveDependentsSQL, groups, ids, b.GroupDeps, b.Deps)
	if err != nil {
		return nil, nil, fmt.Errorf("resolving %d jobs with dependencies: %w", len(cands), interpretError(err))
	}
	var applied []Applied
	var left []fairway.JobRef
	var a Applied
	var leftOver bool
	var st *string
	var runAt *time.Time
	_, err = pgx.ForEachRow(rows, []any{&leftOver, &a.Group, &a.JobID, &st, &runAt}, func() error {
		if leftOver {
			left = append(left, fairway.JobRef{Group: a.Group, ID: a.JobID})
			return nil
		}
		x := Applied{Group: a.Group, JobID: a.JobID, State: fairway.State(*st)}
		if runAt != nil {
			x.RunAt = *runAt
		}
		applied = append(applied, x)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("resolving %d jobs with dependencies: %w", len(cands), interpretError(err))
	}
	// The statement returns the left ones in no given order.
	if len(left) > 1 {
		at := make(map[fairway.JobRef]int, len(cands))
		for i, c := range cands {
			if _, ok := at[c]; !ok {
				at[c] = i
			}
		}
		slices.SortFunc(left, func(x, y fairway.JobRef) int { return at[x] - at[y] })
	}
	return applied, left, nil
}

// BlockedDependents returns the blocked jobs (pending, with depends_on)
// that name one of the jobs in ended, each once, at most limit per group:
// the groups whose ended jobs have more are returned in over instead, their
// dependents not, for the caller to check their blocked jobs a slice at a
// time (BlockedJobs). One statement per group (sent together), each one
// scan of the dependents' index and at most limit+1 rows.
func (s *Store) BlockedDependents(ctx context.Context, ended []fairway.JobRef, limit int) (deps []fairway.JobRef, over []string, err error) {
	if len(ended) == 0 {
		return nil, nil, nil
	}
	if limit <= 0 {
		limit = DependentsLimitDefault
	}
	var groups []string
	ids := map[string][]string{}
	for _, e := range ended {
		if _, ok := ids[e.Group]; !ok {
			groups = append(groups, e.Group)
		}
		ids[e.Group] = append(ids[e.Group], e.ID)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, indexScansOnlySQL); err != nil {
			return err
		}
		batch := &pgx.Batch{}
		for _, g := range groups {
			batch.Queue(blockedDependentsSQL, g, ids[g], limit+1)
		}
		br := tx.SendBatch(ctx, batch)
		defer func() { _ = br.Close() }() // on an early return its error is returned; else Close's, below
		for _, g := range groups {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			found, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(found) > limit {
				over = append(over, g)
				continue
			}
			for _, id := range found {
				deps = append(deps, fairway.JobRef{Group: g, ID: id})
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the dependents of %d jobs: %w", len(ended), err)
	}
	return deps, over, nil
}

// BlockedJobs returns a slice of each group's blocked jobs (pending, with
// depends_on): at most limit ids, in key order, after the group's cursor
// (after[i] for groups[i]; "" from the start). A slice shorter than limit
// is the group's last. One index range scan per group.
func (s *Store) BlockedJobs(ctx context.Context, groups, after []string, limit int) (map[string][]string, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, blockedJobsSQL, groups, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading blocked jobs: %w", interpretError(err))
	}
	out := make(map[string][]string, len(groups))
	var g, id string
	_, err = pgx.ForEachRow(rows, []any{&g, &id}, func() error {
		out[g] = append(out[g], id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading blocked jobs: %w", interpretError(err))
	}
	return out, nil
}

// BlockedGroups returns the groups that have blocked jobs (pending, with
// depends_on): those the sweep goes through. One index descent per group.
func (s *Store) BlockedGroups(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, blockedGroupsSQL)
	if err != nil {
		return nil, fmt.Errorf("reading the groups with blocked jobs: %w", interpretError(err))
	}
	groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading the groups with blocked jobs: %w", interpretError(err))
	}
	return groups, nil
}

// ResolveDependents releases or cancels the blocked jobs that depend on
// the jobs in ended (which reached a final state), and the blocked jobs
// among candidates (checked themselves: jobs just stored or retried), all
// of them, in statements of bounded work (the default ResolveBounds, at
// most ResolveJobsDefault candidates each): the dependents of an ended job
// that has more than DependentsLimitDefault are found by reading all its
// group's blocked jobs, a slice at a time. It returns the jobs it changed:
// waiting ones (due at their run_at) and cancelled ones, whose own
// dependents the caller resolves in turn. The coordinators resolve through
// the pieces (BlockedDependents, ResolveCandidates, BlockedJobs), a
// bounded slice per group in turn; this is for a caller whose work is
// bounded already (one request's jobs) or that wants it all done.
func (s *Store) ResolveDependents(ctx context.Context, ended, candidates []fairway.JobRef) ([]Applied, error) {
	cands := slices.Clone(candidates)
	for len(ended) > 0 {
		n := min(len(ended), 256)
		found, over, err := s.BlockedDependents(ctx, ended[:n], DependentsLimitDefault)
		if err != nil {
			return nil, err
		}
		ended = ended[n:]
		cands = append(cands, found...)
		for _, g := range over {
			for after := ""; ; {
				slice, err := s.BlockedJobs(ctx, []string{g}, []string{after}, ResolveJobsDefault)
				if err != nil {
					return nil, err
				}
				ids := slice[g]
				for _, id := range ids {
					cands = append(cands, fairway.JobRef{Group: g, ID: id})
				}
				if len(ids) < ResolveJobsDefault {
					break
				}
				after = ids[len(ids)-1]
			}
		}
	}
	cands = dedupRefs(cands)
	var all []Applied
	for len(cands) > 0 {
		n := min(len(cands), ResolveJobsDefault)
		applied, left, err := s.ResolveCandidates(ctx, cands[:n], ResolveBounds{})
		if err != nil {
			return all, err
		}
		all = append(all, applied...)
		cands = append(left, cands[n:]...)
	}
	return all, nil
}

// dedupRefs drops the repeats of refs, keeping the first of each.
func dedupRefs(refs []fairway.JobRef) []fairway.JobRef {
	seen := make(map[fairway.JobRef]bool, len(refs))
	out := refs[:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
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

// Bounds of a graph (Graph): the defaults, which the coordinators use.
const (
	// GraphJobsDefault bounds the jobs of a graph.
	GraphJobsDefault = 500
	// GraphEdgesDefault bounds the edges its walk reads.
	GraphEdgesDefault = 10_000
)

// Graph returns the job id of group with the jobs it depends on and the
// jobs that depend on it, directly or not (its ancestors and descendants,
// not their other relatives), in submission order, without args or
// result. A job of another group is not found.
//
// The walk goes a level at a time, up and down in turn, each job visited
// once, so its cost is bounded whatever the graph's shape (diamonds, edges
// that skip levels): at most maxJobs jobs, and about maxEdges edges read
// (each job's depends_on read once, and at most maxEdges dependents'
// rows): a graph that has more is answered with the nearest relatives,
// and truncated says so. A statement per level: key look-ups up, one scan
// of the dependents' index down (the only one its transaction may use:
// see index_scans_only.sql).
func (s *Store) Graph(ctx context.Context, group, id string, maxJobs, maxEdges int) (jobs []fairway.Job, truncated bool, err error) {
	err = s.inGraphTx(ctx, id, func(tx pgx.Tx) error {
		var nodes []string
		nodes, truncated, err = walkGraph(ctx, tx, graphWalk{group: group, id: id, maxJobs: maxJobs, maxEdges: maxEdges})
		if err != nil {
			return err
		}
		jobs, err = graphJobs(ctx, tx, group, nodes)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return jobs, truncated, nil
}

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
	// edgesOf is the state's part of a step (nothing on the row engine).
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
