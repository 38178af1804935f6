package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/choose_engine.sql
	chooseEngineSQL string
	//go:embed sql/engine.sql
	engineSQL string
)

// The engines a database may have recorded (migration 021). Fairway runs
// the journal (the waiting queue in the partition leader's memory,
// PostgreSQL as its append-only log: docs/journal.md). A database whose
// first coordinator ran before the journal (2026-11-30) recorded the
// rows, the engine of those versions, where a job's row in fairway_job
// was its queue entry and its record: 'fairway migrate --to-journal'
// moves it onto the journal.
const (
	EngineRows    = "rows"
	EngineJournal = "journal"
)

// errRowEngine is the refusal of a database of the row engine.
func errRowEngine(at time.Time) error {
	return &fairway.Error{Code: fairway.CodeConflict, Field: "engine", Message: fmt.Sprintf(
		"this database's jobs are stored by the row engine (chosen %s by its first coordinator), which this version of Fairway no longer runs: "+
			"stop every coordinator and run 'fairway migrate --to-journal --database-url …' to move it onto the journal "+
			"(one transaction; its unfinished jobs keep their attempts: docs/operations.md, \"The engine\")", at.UTC().Format(time.RFC3339))}
}

// OpenJournal records the journal as a new database's engine, and refuses
// a database of the row engine (errRowEngine).
func (s *Store) OpenJournal(ctx context.Context) error {
	chosen, at, err := recordEngine(ctx, s.pool, EngineJournal)
	if err != nil {
		return fmt.Errorf("recording the database's engine: %w", interpretError(err))
	}
	if chosen != EngineJournal {
		return errRowEngine(at)
	}
	return nil
}

// OnRowEngine says whether the database recorded the row engine (a
// version before 2026-11-30 filled it): coordinators refuse it until
// ConvertToJournal moves it.
func (s *Store) OnRowEngine(ctx context.Context) (bool, error) {
	engine, err := readEngine(ctx, s.pool)
	if err != nil {
		return false, fmt.Errorf("reading the database's engine: %w", interpretError(err))
	}
	return engine == EngineRows, nil
}

// onJournalTx makes sure, in q (a caller's transaction), that the
// database is on the journal: one without an engine (no coordinator has
// started on it yet) records it in q; one of the row engine is refused
// (errRowEngine).
func onJournalTx(ctx context.Context, q pgx.Tx) error {
	chosen, at, err := recordEngine(ctx, q, EngineJournal)
	if err != nil {
		return err
	}
	if chosen != EngineJournal {
		return errRowEngine(at)
	}
	return nil
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
