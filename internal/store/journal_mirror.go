package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/journal_mirror.sql
	journalMirrorSQL string
	//go:embed sql/journal_mirror_live.sql
	journalMirrorLiveSQL string
)

// MirrorJournal installs the journal mirror (issue 31, step 2 of
// docs/journal.md): triggers that append to fairway_journal, in each
// statement's transaction, what the row engine did to fairway_job, as the
// rows the journal engine will append itself. The tests' databases have
// it, so that CheckJournalMirror holds the fold's rules against the row
// engine's in every test; `fairway bench --journal-mirror` measures what
// the triggers cost (several times PostgreSQL's CPU per job: a test
// device, not the journal's own cost). Not installed by Migrate: the row
// engine runs without.
func (s *Store) MirrorJournal(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, journalMirrorSQL); err != nil {
		return fmt.Errorf("installing the journal mirror: %w", err)
	}
	return nil
}

// HandWritten says whether a test wrote job states through this store by
// hand (SetJobTimes, EndedAgo, SpreadHistory: states no engine writes),
// so that CheckJournalMirror has nothing to compare.
func (s *Store) HandWritten() bool { return s.handWritten.Load() }

// CheckJournalMirror folds the journal the mirror wrote and compares the
// state with fairway_job: every unfinished job must be in the fold, with
// its state, attempt, retries, task, priority and limits, and, while an
// executor holds it, that executor's instance, its progress and whether it
// is to be cancelled; and the fold must hold no job that PostgreSQL has
// ended. The error lists the differences. Run it when nothing writes.
func (s *Store) CheckJournalMirror(ctx context.Context) error {
	folded := journal.NewState()
	if _, err := (&journal.Tail{}).Fold(ctx, s.pool, folded); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, journalMirrorLiveSQL)
	if err != nil {
		return fmt.Errorf("reading the unfinished jobs: %w", err)
	}
	// What both engines say of an unfinished job: the fold's times,
	// places and dependencies are its own.
	type mirrored struct {
		Task, Priority               string
		State                        fairway.State
		Attempt, Retries, MaxRetries int32
		Progress                     int16
		Executor, Instance           string
		TimeoutS                     int32
		Triggered                    bool
	}
	type live struct {
		mirrored
		cancelRequested bool
	}
	pg := map[fairway.JobRef]live{}
	var (
		ref fairway.JobRef
		j   live
	)
	if _, err := pgx.ForEachRow(rows, []any{&ref.Group, &ref.ID, &j.Task, &j.State, &j.Attempt, &j.Retries, &j.MaxRetries, &j.Priority,
		&j.Executor, &j.Instance, &j.Progress, &j.cancelRequested}, func() error {
		pg[ref] = j
		return nil
	}); err != nil {
		return fmt.Errorf("reading the unfinished jobs: %w", err)
	}
	var diffs []string
	for ref, want := range pg {
		got := folded.Jobs.Get(ref)
		if got == nil {
			diffs = append(diffs, fmt.Sprintf("%s/%s: %s in fairway_job, not in the journal's fold", ref.Group, ref.ID, want.State))
			continue
		}
		a := want.mirrored
		b := mirrored{Task: got.Task, Priority: got.Priority(), State: got.State(), Attempt: got.Attempt, Retries: int32(got.Retries),
			MaxRetries: int32(got.MaxRetries), Progress: int16(got.Progress), TimeoutS: got.TimeoutS, Triggered: got.Triggered()}
		held := a.State == fairway.StateScheduled || a.State == fairway.StateRunning
		if !held {
			a.Executor, a.Instance, a.Progress = "", "", 0
		}
		if got.Holder != nil {
			b.Executor, b.Instance = got.Holder.Executor, got.Holder.Instance
		}
		if got.CancelRequested() != (held && want.cancelRequested) {
			diffs = append(diffs, fmt.Sprintf("%s/%s: cancel requested %v in the fold, %v in fairway_job", ref.Group, ref.ID, got.CancelRequested(), want.cancelRequested))
		}
		if a != b {
			diffs = append(diffs, fmt.Sprintf("%s/%s: fairway_job %+v, the fold %+v", ref.Group, ref.ID, a, b))
		}
	}
	for ref, got := range folded.Jobs.All() {
		if _, ok := pg[ref]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s/%s: %s in the journal's fold, ended or absent in fairway_job", ref.Group, ref.ID, got.State()))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	slices.Sort(diffs)
	return errors.New("the journal's fold differs from fairway_job:\n" + strings.Join(diffs[:min(len(diffs), 20)], "\n"))
}
