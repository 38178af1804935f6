package store

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/choose_engine.sql
	chooseEngineSQL string
	//go:embed sql/engine.sql
	engineSQL string
	//go:embed sql/journal_sheds_row_engine.sql
	journalShedsRowEngineSQL string
	//go:embed sql/journal_shed_needed.sql
	journalShedNeededSQL string
)

// The engines a database may run (migration 021; coordinator.Config.Engine).
const (
	EngineRows    = "rows"
	EngineJournal = "journal"
	// EngineNew is the engine of a new database whose first coordinator
	// names none: the journal, since 2026-11-30, when it measured nowhere
	// slower than the rows (docs/performance.md, 2026-11-30, later:
	// "Every scenario, both engines, the same binary"). A database that
	// held jobs and recorded no engine was given the rows by migration
	// 025, whatever this says, and keeps them until 'fairway migrate
	// --to-journal' moves it onto the journal.
	EngineNew = EngineJournal
)

// ChooseEngine records engine as the database's when none is yet (the
// first coordinator to start chooses), and refuses another: a coordinator
// on the row engine does not see the journal's unfinished jobs, nor the
// journal's leader the row engine's, so two engines on one database would
// leave jobs that no one runs. An empty engine takes the database's, or
// EngineNew on a database without one. It returns the database's engine.
func (s *Store) ChooseEngine(ctx context.Context, engine string) (string, error) {
	chosen, at, err := recordEngine(ctx, s.pool, cmp.Or(engine, EngineNew))
	if err != nil {
		return "", fmt.Errorf("recording the database's engine: %w", interpretError(err))
	}
	if engine != "" && chosen != engine {
		return "", fmt.Errorf("coordinator.engine is %q, but this database's jobs are stored by the %q engine (chosen by the first coordinator that started on it, %s): "+
			"set coordinator.engine to %q, or use another database (the engines do not see each other's unfinished jobs)",
			engine, chosen, at.UTC().Format(time.RFC3339), chosen)
	}
	if chosen == EngineJournal {
		// The row engine's indexes of unfinished jobs index nothing on a
		// journal database, whose fairway_job holds records only, and
		// every record's insert evaluates their predicates; a running
		// job's log lines have no record to refer to yet.
		var needed bool
		if err := s.pool.QueryRow(ctx, journalShedNeededSQL).Scan(&needed); err != nil {
			return "", fmt.Errorf("reading the journal database's indexes: %w", interpretError(err))
		}
		if needed {
			if _, err := s.pool.Exec(ctx, journalShedsRowEngineSQL); err != nil {
				return "", fmt.Errorf("dropping the row engine's indexes of unfinished jobs: %w", interpretError(err))
			}
		}
		s.journal.Store(true)
	}
	return chosen, nil
}

// OnJournal says whether ChooseEngine found this database on the journal
// engine. Its fairway_job then holds the records of ended jobs only,
// without the row engine's indexes of unfinished ones: the row engine's
// statements over unfinished jobs have nothing to find there, and are
// not run (a heartbeat renews no job's lease, a registration releases no
// previous instance's jobs: the journal's leader does both).
func (s *Store) OnJournal() bool { return s.journal.Load() }

// engineOf is the database's engine, read in q (a caller's transaction).
// On a database without one (no coordinator has started on it yet), it
// records EngineNew in q: the jobs q stores are then the new engine's,
// and a coordinator that names the other is refused at its start instead
// of never seeing them.
func engineOf(ctx context.Context, q pgx.Tx) (string, error) {
	engine, err := readEngine(ctx, q)
	if err != nil || engine != "" {
		return engine, err
	}
	engine, _, err = recordEngine(ctx, q, EngineNew)
	return engine, err
}

// rowQuerier is a pool or a transaction, for a statement of one row.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readEngine is the engine the database recorded ("" for none yet).
func readEngine(ctx context.Context, q rowQuerier) (string, error) {
	var engine string
	err := q.QueryRow(ctx, engineSQL).Scan(&engine)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return engine, err
}

// recordEngine records engine as the database's unless one is, and
// returns the one recorded and when it was chosen.
func recordEngine(ctx context.Context, q rowQuerier, engine string) (chosen string, at time.Time, err error) {
	// Twice at most: a coordinator choosing at the same moment commits
	// its row after this statement's snapshot, which then finds none.
	for range 2 {
		err = q.QueryRow(ctx, chooseEngineSQL, engine).Scan(&chosen, &at)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	return chosen, at, err
}
