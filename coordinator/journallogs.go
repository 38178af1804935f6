package coordinator

import (
	"context"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
)

// Job log lines. fairway_job_log keeps them, without a foreign key to
// fairway_job (a running job has no record there: store.OpenJournal drops
// the key a database moved from the row engine had); retention deletes
// them with their job's record.

// appendLogs stores the log lines of a batch of reports: those of
// attempts that the partition's state says their senders hold now, and
// those of jobs that ended, checked against their records (a last line
// that came after the end). Lines of an attempt that is not the job's latest, or not its
// sender's, are dropped.
func (e *journalEngine) appendLogs(ctx context.Context, logs []store.AttemptLog) error {
	if len(logs) == 0 {
		return nil
	}
	var held, ended []store.AttemptLog
	e.leader.Follow(func(s *journal.State) {
		for _, l := range logs {
			j := s.Jobs.Get(fairway.JobRef{Group: l.Group, ID: l.JobID})
			switch {
			case j == nil:
				ended = append(ended, l)
			case j.Holder != nil && int(j.Attempt) == l.Attempt.Attempt && j.Holder.Executor == l.Executor && j.Holder.Instance == l.Instance:
				held = append(held, l)
			}
		}
	})
	if err := e.store.AppendHeldLogs(ctx, held); err != nil {
		return err
	}
	return e.store.AppendLogs(ctx, ended)
}

// journalLogsLive says whether the job ref is unfinished in the
// partition's state, as of every row committed before the call: its log
// lines are then read without a record to find first.
func (c *Coordinator) journalLogsLive(ctx context.Context, ref fairway.JobRef) (bool, error) {
	live, err := c.parts.of(ref.Group).leader.Has(ctx, ref)
	return live, journalError(err)
}
