// Package journal is the journal engine's log (issue 31, docs/journal.md):
// batches appended as rows of fairway_journal, never updated; a tail that
// reads them in an order that respects causality, each once and never
// before its commit; and a lease per partition whose epoch fences a
// deposed leader's appends in their own statement.
//
// This is the design's first step: nothing in Fairway writes or reads the
// journal yet.
package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what appends and reads need: a pool, a connection or a
// transaction (the caller's, for an append that must commit with it).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Row is one appended batch.
type Row struct {
	ID        int64
	XID       uint64 // the transaction that appended it
	Partition int16
	Epoch     int64 // the leader's epoch; 0 for any coordinator's append
	Kind      Kind
	At        time.Time
	Body      []byte
}

// ErrFenced is the refusal of a leader's append whose epoch is no longer
// the partition's: another coordinator leads it now.
var ErrFenced = errors.New("journal: this coordinator's lease on the partition is gone (another leads it): nothing was appended")

// Append appends rows that any coordinator may write (epoch 0: ingest,
// reports), in q's transaction.
func Append(ctx context.Context, q Querier, partition int16, kind Kind, bodies ...[]byte) error {
	if len(bodies) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `INSERT INTO fairway_journal (partition, kind, body) SELECT $1, $2, b FROM unnest($3::bytea[]) AS b`,
		partition, kind, bodies)
	if err != nil {
		return fmt.Errorf("appending %d %s rows to the journal: %w", len(bodies), kind, err)
	}
	return nil
}

// AppendFenced appends a leader's rows, carrying its epoch, only if the
// epoch is still the partition's: the check is in the statement that
// inserts, so that a leader frozen past its lease and resumed cannot
// commit what it decided while deposed. ErrFenced when it is not.
func AppendFenced(ctx context.Context, q Querier, partition int16, epoch int64, kind Kind, bodies ...[]byte) error {
	if len(bodies) == 0 {
		return nil
	}
	tag, err := q.Exec(ctx, `INSERT INTO fairway_journal (partition, epoch, kind, body)
SELECT $1, $2, $3, b FROM unnest($4::bytea[]) AS b
 WHERE EXISTS (SELECT 1 FROM fairway_journal_lease l WHERE l.partition = $1 AND l.epoch = $2 AND l.until > now())`,
		partition, epoch, kind, bodies)
	if err != nil {
		return fmt.Errorf("appending %d %s rows to the journal: %w", len(bodies), kind, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// Lease is a partition's leadership as one coordinator holds it.
type Lease struct {
	Partition int16
	Holder    string
	Epoch     int64
	Until     time.Time
}

// Acquire takes the lease of partition for holder for ttl, if it is free
// or expired, with an epoch above every earlier holder's; or renews it if
// holder holds it (same epoch). ok is false when another holds it.
func Acquire(ctx context.Context, q Querier, partition int16, holder string, ttl time.Duration) (Lease, bool, error) {
	l := Lease{Partition: partition}
	err := q.QueryRow(ctx, `INSERT INTO fairway_journal_lease AS l (partition, holder, epoch, until)
VALUES ($1, $2, 1, now() + $3::interval)
ON CONFLICT (partition) DO UPDATE
   SET holder = EXCLUDED.holder,
       epoch  = CASE WHEN l.holder = EXCLUDED.holder AND l.until > now() THEN l.epoch ELSE l.epoch + 1 END,
       until  = EXCLUDED.until
 WHERE l.holder = EXCLUDED.holder OR l.until <= now()
RETURNING holder, epoch, until`, partition, holder, ttl.String()).Scan(&l.Holder, &l.Epoch, &l.Until)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("taking the lease of journal partition %d: %w", partition, err)
	}
	return l, true, nil
}

// Tail reads a partition's rows in xid order (then id), each once, never
// before its commit: a read takes the rows of the transactions below the
// oldest one still running (pg_snapshot_xmin), which have all ended, and
// moves past them. Transactions that depend on each other are in xid order
// (a transaction that saw another's commit began after it, and took its
// xid at its first write, after the other took its own), so a job's rows
// are read in the order they happened. A long-running transaction holds
// the tail back until it ends: appends belong in short transactions.
type Tail struct {
	Partition int16
	// from is the smallest xid not read yet.
	from uint64
}

// TailFrom is a tail of partition that reads from position (a Position
// an earlier tail reached, as a snapshot records it).
func TailFrom(partition int16, position uint64) *Tail {
	return &Tail{Partition: partition, from: position}
}

// Position is where the tail stands: every row of a transaction below it
// has been read.
func (t *Tail) Position() uint64 { return t.from }

// Next returns the rows that became readable since the last call, at
// most limit (0: no limit); the rest come with the next calls.
func (t *Tail) Next(ctx context.Context, q Querier, limit int) ([]Row, error) {
	var horizon uint64
	if err := q.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::numeric::bigint`).Scan(&horizon); err != nil {
		return nil, fmt.Errorf("reading the journal's horizon: %w", err)
	}
	if horizon <= t.from {
		return nil, nil
	}
	sql := `SELECT ` + rowColumns + ` FROM fairway_journal
 WHERE partition = $1 AND xid >= $2::text::xid8 AND xid < $3::text::xid8 ORDER BY xid, id`
	args := []any{t.Partition, fmt.Sprint(t.from), fmt.Sprint(horizon)}
	if limit > 0 {
		// A batch may stop inside a transaction's rows: resume at that
		// transaction, past the rows read (by id).
		sql += ` LIMIT $4`
		args = append(args, limit)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	if limit > 0 && len(out) == limit {
		return t.resumeInside(ctx, q, out, horizon)
	}
	t.from = horizon
	return out, nil
}

// resumeInside completes a batch cut by its limit: the rest of the last
// transaction's rows are read now (a transaction's rows are never split
// between two reads), and the tail moves to the next xid.
func (t *Tail) resumeInside(ctx context.Context, q Querier, out []Row, horizon uint64) ([]Row, error) {
	last := out[len(out)-1]
	rows, err := q.Query(ctx, `SELECT `+rowColumns+` FROM fairway_journal
 WHERE partition = $1 AND xid = $2::text::xid8 AND id > $3 ORDER BY id`, t.Partition, fmt.Sprint(last.XID), last.ID)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	rest, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	t.from = min(last.XID+1, horizon)
	return append(out, rest...), nil
}

// SaveSnapshot stores the partition's state as of the tail's position,
// in place of the last one.
func SaveSnapshot(ctx context.Context, q Querier, s *State, tail *Tail) error {
	body, err := s.Snapshot()
	if err != nil {
		return fmt.Errorf("encoding the snapshot of journal partition %d: %w", tail.Partition, err)
	}
	_, err = q.Exec(ctx, `INSERT INTO fairway_journal_snapshot (partition, tail_from, body) VALUES ($1, $2::text::xid8, $3)
ON CONFLICT (partition) DO UPDATE SET tail_from = EXCLUDED.tail_from, taken = now(), body = EXCLUDED.body`,
		tail.Partition, fmt.Sprint(tail.from), body)
	if err != nil {
		return fmt.Errorf("storing the snapshot of journal partition %d: %w", tail.Partition, err)
	}
	return nil
}

// LoadSnapshot reads the partition's last snapshot and the tail that
// goes on from it: an empty state and a tail from the start when there
// is none.
func LoadSnapshot(ctx context.Context, q Querier, partition int16) (*State, *Tail, error) {
	var (
		from int64
		body []byte
	)
	err := q.QueryRow(ctx, `SELECT tail_from::text::numeric::bigint, body FROM fairway_journal_snapshot WHERE partition = $1`, partition).Scan(&from, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return NewState(), &Tail{Partition: partition}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the snapshot of journal partition %d: %w", partition, err)
	}
	s, err := Restore(body)
	if err != nil {
		return nil, nil, fmt.Errorf("journal partition %d: %w", partition, err)
	}
	return s, TailFrom(partition, uint64(from)), nil //nolint:gosec // G115: an xid8 is below 2^63
}

// rowColumns are a Row's columns, as scanRow reads them.
const rowColumns = `id, xid::text::numeric::bigint, partition, epoch, kind, at, body`

func scanRow(r pgx.CollectableRow) (Row, error) {
	var row Row
	var xid int64
	err := r.Scan(&row.ID, &xid, &row.Partition, &row.Epoch, &row.Kind, &row.At, &row.Body)
	row.XID = uint64(xid) //nolint:gosec // G115: an xid8 is below 2^63 for the life of any cluster
	return row, err
}
