// Package journal is the journal engine's log (issue 31, docs/journal.md):
// batches appended as rows of fairway_journal, never updated; a tail that
// reads them in an order that respects causality, each once and never
// before its commit; a lease per partition whose epoch fences a deposed
// leader's appends in their own statement; the rows' bodies (entry.go);
// and the fold of rows into a partition's state, with its snapshots
// (state.go).
//
// This is the design's first step: nothing in Fairway writes or reads the
// journal yet.
package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Querier is what appends and reads need: a pool, a connection or a
// transaction (the caller's, for an append that must commit with it).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
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

// Who appends what. The fold's order is the order in which a reader reads
// the rows, and readers read at different moments (the leader as rows
// commit, a successor or a check from a snapshot, at once): two rows of
// one job appended by two writers at once could be read in one order by
// the leader and in the other by its successor, and fold to two states
// (a cancel and a claim of the same waiting job). So the leader appends
// every row whose effect depends on the order (claims, reports, cancels,
// releases, timers, resolutions, pauses), one batch after the other, with
// its epoch (AppendFenced); any coordinator appends submissions (Append),
// which fold to the same state in any order with the rest (a new job; a
// dependency that ended first is named for the leader to resolve, as one
// that ends after: the fold never resolves dependents itself).

// Append appends submissions, which any coordinator may write (epoch 0:
// ingest, InsertTx in the caller's transaction), in q's transaction. It
// refuses the other kinds: their order matters, and only the leader
// appends them (see "Who appends what").
func Append(ctx context.Context, q Querier, partition int16, kind Kind, bodies ...[]byte) error {
	if kind != Submitted {
		return fmt.Errorf("appending %s rows to the journal: only the partition's leader appends them (AppendFenced); any coordinator appends %s rows only", kind, Submitted)
	}
	if len(bodies) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, appendSQL, partition, kind, bodies)
	if err != nil {
		return fmt.Errorf("appending %d %s rows to the journal: %w", len(bodies), kind, err)
	}
	return nil
}

// appendSQL appends rows any coordinator may append (epoch 0).
const appendSQL = `INSERT INTO fairway_journal (partition, kind, body) SELECT $1, $2, b FROM unnest($3::bytea[]) AS b`

// leaseLockClass is the first key of the advisory lock of a partition's
// lease (the second is the partition): a leader's append holds it shared
// from its epoch check to its commit, a takeover exclusive while it
// raises the epoch. So a row of a deposed leader is committed before its
// successor's epoch begins (and the successor reads it before it acts) or
// refused: never committed after.
const leaseLockClass = 0x4a524e4c // "JRNL"

// appendFencedSQL inserts a leader's rows if its epoch is the partition's
// and its lease runs; a statement after the lock, so that its snapshot
// sees a takeover that held the lock.
const appendFencedSQL = `INSERT INTO fairway_journal (partition, epoch, kind, body)
SELECT $1, $2, $3, b FROM unnest($4::bytea[]) AS b
 WHERE EXISTS (SELECT 1 FROM fairway_journal_lease l WHERE l.partition = $1 AND l.epoch = $2 AND l.until > now())`

// AppendFenced appends a leader's rows, carrying its epoch, only if the
// epoch is still the partition's: the check is in the statement that
// inserts, under the lease's lock (leaseLockClass), so that a leader
// frozen past its lease and resumed cannot commit what it decided while
// deposed. ErrFenced when it is not. With a pool or a connection it is
// one transaction, sent in one round trip (the server runs it to its
// commit whatever the client does meanwhile); in the caller's
// transaction (pgx.Tx) the lock is held to the caller's commit: use
// AppendFencedIdle there, so that a frozen leader's open transaction
// cannot hold its successor back for ever.
func AppendFenced(ctx context.Context, q Querier, partition int16, epoch int64, kind Kind, bodies ...[]byte) error {
	return appendFenced(ctx, q, partition, epoch, 0, kind, bodies)
}

// AppendFencedIdle is AppendFenced in the caller's transaction tx, which
// PostgreSQL ends if it idles longer than idle (the lease's TTL, say): a
// leader frozen before its commit loses the transaction, and its rows,
// and its successor's takeover goes on.
func AppendFencedIdle(ctx context.Context, tx pgx.Tx, partition int16, epoch int64, idle time.Duration, kind Kind, bodies ...[]byte) error {
	return appendFenced(ctx, tx, partition, epoch, idle, kind, bodies)
}

func appendFenced(ctx context.Context, q Querier, partition int16, epoch int64, idle time.Duration, kind Kind, bodies [][]byte) error {
	return appendFencedRows(ctx, q, partition, epoch, idle, []Rows{{Kind: kind, Bodies: bodies}}, nil)
}

// Rows are rows of one kind to append.
type Rows struct {
	Kind   Kind
	Bodies [][]byte
}

// AppendFencedRows is AppendFenced of rows of several kinds, in the order
// given, in one transaction (their ids in that order): all of them, or
// none and ErrFenced.
func AppendFencedRows(ctx context.Context, q Querier, partition int16, epoch int64, rows []Rows) error {
	return appendFencedRows(ctx, q, partition, epoch, 0, rows, nil)
}

// appendFencedRows appends rows, and queues what also adds to the
// transaction after them (statements that check the epoch as the append
// does: the records of the jobs the rows end).
func appendFencedRows(ctx context.Context, q Querier, partition int16, epoch int64, idle time.Duration, rows []Rows, also func(*pgx.Batch)) error {
	return appendFencedRowsThen(ctx, q, partition, epoch, idle, rows, also, nil)
}

// appendFencedRowsThen is appendFencedRows that queues what then adds
// after the commit, in the same round trip (the leader's read of the
// tail, Tail.Queue). Not in a caller's transaction (q a pgx.Tx): then
// there is no commit to read after.
func appendFencedRowsThen(ctx context.Context, q Querier, partition int16, epoch int64, idle time.Duration, rows []Rows, also, then func(*pgx.Batch)) error {
	rows = slices.DeleteFunc(slices.Clone(rows), func(r Rows) bool { return len(r.Bodies) == 0 })
	if len(rows) == 0 {
		return nil
	}
	n, kinds := 0, make([]string, len(rows))
	for i, r := range rows {
		n += len(r.Bodies)
		kinds[i] = string(r.Kind)
	}
	// Every insert checks the epoch under the same shared lock and at the
	// same now(): all of them insert, or none.
	var tag pgconn.CommandTag
	b := &pgx.Batch{}
	_, inTx := q.(pgx.Tx)
	if !inTx {
		b.Queue("BEGIN")
	} else if idle > 0 {
		b.Queue("SELECT set_config('idle_in_transaction_session_timeout', $1, true)", fmt.Sprint(idle.Milliseconds()))
	}
	b.Queue("SELECT pg_advisory_xact_lock_shared($1, $2)", leaseLockClass, int32(partition))
	b.Queue(appendFencedSQL, partition, epoch, rows[0].Kind, rows[0].Bodies).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	for _, r := range rows[1:] {
		b.Queue(appendFencedSQL, partition, epoch, r.Kind, r.Bodies)
	}
	if also != nil {
		also(b)
	}
	committed := false
	if !inTx {
		b.Queue("COMMIT").Exec(func(pgconn.CommandTag) error { committed = true; return nil })
		if then != nil {
			then(b)
		}
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil && !committed {
		// (What failed after the commit, the read then queued, is read
		// again by whoever needs it.)
		return fmt.Errorf("appending %d rows (%s) to the journal: %w", n, strings.Join(kinds, ", "), err)
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
	// At is PostgreSQL's clock when the lease was taken or renewed
	// (clock_timestamp(): the statement's moment, not its transaction's).
	At time.Time
}

// Acquire takes the lease of partition for holder for ttl, if it is free
// or expired, with an epoch above every earlier holder's; or renews it if
// holder holds it (same epoch). ok is false when another holds it.
//
// A takeover waits for the appends of the holder in progress (they hold
// the lease's lock, leaseLockClass): each commits before the new epoch
// begins, or is refused after it. It waits at most ttl (lock_timeout):
// an error, and the next try goes on.
func Acquire(ctx context.Context, q Querier, partition int16, holder string, ttl time.Duration) (Lease, bool, error) {
	l := Lease{Partition: partition}
	found := false
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT set_config('lock_timeout', $1, true)", fmt.Sprint(ttl.Milliseconds()))
	// The lock only when the epoch may change (the lease ran out, whoever
	// held it): a renewal, or a try while another holds it, takes none.
	b.Queue(`SELECT pg_advisory_xact_lock($1, $2::int) FROM fairway_journal_lease
 WHERE partition = $3 AND until <= now()`, leaseLockClass, int32(partition), partition)
	b.Queue(acquireSQL, partition, holder, ttl.String()).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&l.Holder, &l.Epoch, &l.Until, &l.At)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	b.Queue("COMMIT")
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return Lease{}, false, fmt.Errorf("taking the lease of journal partition %d: %w", partition, err)
	}
	if !found {
		return Lease{}, false, nil
	}
	return l, true, nil
}

// LeaseHolder names the coordinator that holds partition's lease now
// ("" when none does: never taken, or run out).
func LeaseHolder(ctx context.Context, q Querier, partition int16) (string, error) {
	var holder string
	err := q.QueryRow(ctx, `SELECT holder FROM fairway_journal_lease WHERE partition = $1 AND until > now()`, partition).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading who holds journal partition %d's lease: %w", partition, err)
	}
	return holder, nil
}

// acquireSQL takes or renews a lease (see Acquire).
const acquireSQL = `INSERT INTO fairway_journal_lease AS l (partition, holder, epoch, until)
VALUES ($1, $2, 1, now() + $3::interval)
ON CONFLICT (partition) DO UPDATE
   SET holder = EXCLUDED.holder,
       epoch  = CASE WHEN l.holder = EXCLUDED.holder AND l.until > now() THEN l.epoch ELSE l.epoch + 1 END,
       until  = EXCLUDED.until
 WHERE l.holder = EXCLUDED.holder OR l.until <= now()
RETURNING holder, epoch, until, clock_timestamp()`

// Tail reads a partition's rows, each once, never before its commit, in
// an order that respects causality. Each read takes a snapshot of the
// transactions that have ended and reads the rows of those that had not
// ended at the previous read's snapshot (PostgreSQL's
// pg_visible_in_snapshot): a row is read at the first read that can see
// it, whatever transactions still run. Within a read, rows go in id
// order: a row's id is taken when its statement runs, so a statement that
// saw another transaction's rows (they had committed) takes ids above
// all of them. (Not xid order: a transaction takes its xid at its first
// write, and one that wrote, then read another's rows and wrote again,
// would come before its cause.) A transaction still running when a later
// one is read cannot be the cause of it (it had not committed), so
// reading past it is safe: a long transaction (a user's InsertTx in a
// slow transaction) holds no one back.
type Tail struct {
	Partition int16
	// seen is the snapshot of the last complete read ("" before any: it
	// sees nothing); reading is the snapshot of a read that its limit cut,
	// and afterID the last row it returned.
	seen, reading string
	afterID       int64
}

// TailFrom is a tail of partition that goes on from position (what an
// earlier tail's Position was, as a snapshot records it).
func TailFrom(partition int16, position string) *Tail {
	return &Tail{Partition: partition, seen: position}
}

// Position is where the tail stands between two reads: the snapshot of
// its last read. "" while a read is cut by its limit (read on to its
// end first).
func (t *Tail) Position() string {
	if t.reading != "" {
		return ""
	}
	return cmp.Or(t.seen, nothingSeen)
}

// nothingSeen is a snapshot in which no transaction has ended.
const nothingSeen = "1:1:"

// Next returns the rows that became readable since the last call, at
// most limit (0: no limit) and about readBytes of bodies (at least one
// row); the rest come with the next calls. No rows means that none are
// readable now. A read is one statement, which takes
// its snapshot (pg_current_snapshot(), the statement's own) with the
// rows: one round trip. A read cut by its limit goes on with the same
// snapshot.
func (t *Tail) Next(ctx context.Context, q Querier, limit int) ([]Row, error) {
	if t.reading != "" {
		return t.goOn(ctx, q, limit)
	}
	rows, err := q.Query(ctx, nextSQL, t.Partition, cmp.Or(t.seen, nothingSeen), limit, readBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	snapshot, out, err := collectNext(rows)
	if err != nil {
		return nil, err
	}
	return t.took(out, snapshot, limit), nil
}

// nextSQL is a read of the tail ($1 partition, $2 the previous read's
// snapshot, $3 limit, $4 readBytes): its snapshot, then its rows.
var nextSQL = `WITH snap AS (SELECT pg_current_snapshot() AS s)
SELECT snap.s::text, j.* FROM snap LEFT JOIN LATERAL (
    SELECT ` + boundedColumns + ` FROM (` + boundedRows("snap.s", "", "$3", "$4") + `) r
) j ON true
 ORDER BY j.id`

// readBytes bounds the bodies a read of the tail returns (its rows'
// sizes as stored, before compression; a read returns at least one row):
// a leader that catches up on a backlog of large batches (a caller's
// 10,000 jobs as one row: megabytes) holds a few of them at a time, not
// thousands. A variable for the tests.
var readBytes = 16 << 20

// boundedColumns are rowColumns as boundedRows names them.
const boundedColumns = `id, xid, partition, epoch, kind, at, body`

// boundedRows selects the readable rows of a read with snapshot (after
// and beyond the condition, when not ""), in id order, at most limit
// (NULL or 0: no limit), up to the first whose bodies with those before
// it reach bytes: rowColumns, then the bodies' sizes up to each.
func boundedRows(snapshot, after, limit, bytes string) string {
	return `SELECT * FROM (
        SELECT ` + rowColumns + `, sum(octet_length(body)) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS upto
          FROM fairway_journal
         WHERE ` + readable(snapshot) + after + `
         ORDER BY id
         LIMIT NULLIF(` + limit + `, 0)
    ) w WHERE upto - octet_length(body) < ` + bytes
}

// collectNext reads nextSQL's answer: its snapshot and its rows.
func collectNext(rows pgx.Rows) (string, []Row, error) {
	var snapshot string
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var (
			row       Row
			id, xid   *int64
			partition *int16
			epoch     *int64
			kind      *string
			at        *time.Time
		)
		if err := r.Scan(&snapshot, &id, &xid, &partition, &epoch, &kind, &at, &row.Body); err != nil || id == nil {
			return row, err
		}
		row.ID, row.XID, row.Partition, row.Epoch, row.Kind, row.At = *id, uint64(*xid), *partition, *epoch, Kind(*kind), *at //nolint:gosec // G115: an xid8 is below 2^63 for the life of any cluster
		return row, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("reading the journal: %w", err)
	}
	if len(out) == 1 && out[0].ID == 0 {
		out = nil // the snapshot alone: no rows
	}
	return snapshot, out, nil
}

// cut says whether a read of limit rows that returned out may have left
// rows for the next (its limit of rows or of bytes reached).
func cut(out []Row, limit int) bool {
	if limit > 0 && len(out) == limit {
		return true
	}
	n := 0
	for _, r := range out {
		n += len(r.Body)
	}
	return n >= readBytes
}

// took moves the tail past a read of limit rows that returned out, with
// snapshot, and returns out.
func (t *Tail) took(out []Row, snapshot string, limit int) []Row {
	if cut(out, limit) {
		t.reading, t.afterID = snapshot, out[len(out)-1].ID // the same snapshot goes on next time
		return out
	}
	t.seen = snapshot
	return out
}

// TailRead is a read of the tail queued in a batch of statements
// (Tail.Queue): the batch's round trip brings its rows, and FoldRead
// folds them.
type TailRead struct {
	tail     *Tail
	from     string // where the tail stood (its seen) when the read was queued
	snapshot string
	rows     []Row
	done     bool // the batch ran the read
}

// Queue queues the tail's next read (as Fold's first, of at most
// foldBatch rows) at the end of b, so that a batch that appends and
// commits reads the journal in the same round trip; nil while a read cut
// by its limit goes on (Fold reads it).
func (t *Tail) Queue(b *pgx.Batch) *TailRead { return t.QueueLater()(b) }

// QueueLater is Queue from where the tail stands now, to call later
// without the tail (whoever guards it may let it go meanwhile): a read
// made after the tail moved is of no use to FoldRead, which reads anew.
func (t *Tail) QueueLater() func(*pgx.Batch) *TailRead {
	if t.reading != "" {
		return func(*pgx.Batch) *TailRead { return nil }
	}
	partition, from := t.Partition, t.seen
	return func(b *pgx.Batch) *TailRead {
		r := &TailRead{tail: t, from: from}
		b.Queue(nextSQL, partition, cmp.Or(from, nothingSeen), foldBatch, readBytes).Query(func(rows pgx.Rows) error {
			var err error
			r.snapshot, r.rows, err = collectNext(rows)
			r.done = err == nil
			return err
		})
		return r
	}
}

// FoldRead is FoldChanges that starts with the rows of r, a read queued
// by Queue (nil, one its batch did not run, or one of another tail or
// position: FoldChanges alone).
func (t *Tail) FoldRead(ctx context.Context, q Querier, s *State, r *TailRead, changed func(Row, []Change)) (int, error) {
	if r == nil || !r.done || r.tail != t || r.from != t.seen || t.reading != "" {
		return t.FoldChanges(ctx, q, s, changed)
	}
	rows := t.took(r.rows, r.snapshot, foldBatch)
	n, err := apply(s, rows, changed)
	if err != nil || t.reading == "" {
		return n, err // an error, or the read was whole
	}
	more, err := t.FoldChanges(ctx, q, s, changed)
	return n + more, err
}

// apply folds rows into s, handing each row's changes to changed (nil:
// none), and returns how many it applied, stopping at the first error.
func apply(s *State, rows []Row, changed func(Row, []Change)) (int, error) {
	for i, r := range rows {
		changes, err := s.Apply(r)
		if err != nil {
			return i, err
		}
		if changed != nil {
			changed(r, changes)
		}
	}
	return len(rows), nil
}

// readable is the condition of a partition's rows ($1) that a read with
// snapshot (an SQL expression) sees and the previous read ($2) did not.
func readable(snapshot string) string {
	return `partition = $1
   AND xid >= pg_snapshot_xmin($2::pg_snapshot) AND xid < pg_snapshot_xmax(` + snapshot + `)
   AND pg_visible_in_snapshot(xid, ` + snapshot + `) AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot)`
}

// goOn reads on a read that its limit cut, with the same snapshot.
func (t *Tail) goOn(ctx context.Context, q Querier, limit int) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT `+boundedColumns+` FROM (`+boundedRows("$3::pg_snapshot", " AND id > $4", "$5::int", "$6::bigint")+`) r ORDER BY id`,
		t.Partition, cmp.Or(t.seen, nothingSeen), t.reading, t.afterID, limit, readBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	if cut(out, limit) {
		t.afterID = out[len(out)-1].ID
		return out, nil
	}
	t.seen, t.reading, t.afterID = t.reading, "", 0
	if len(out) == 0 {
		// The end of a cut read, taken on an old snapshot: read on with
		// a fresh one, so that no rows means none are readable now.
		return t.Next(ctx, q, limit)
	}
	return out, nil
}

// Fold applies to s every row the tail can read now (one read, in parts
// of foldBatch rows), and returns how many it applied. It stops at the
// first error (the rows read before it are applied).
func (t *Tail) Fold(ctx context.Context, q Querier, s *State) (int, error) {
	return t.FoldChanges(ctx, q, s, nil)
}

// FoldChanges is Fold that hands the changes each row made to changed
// (nil: none), as it applies them.
func (t *Tail) FoldChanges(ctx context.Context, q Querier, s *State, changed func(Row, []Change)) (int, error) {
	n := 0
	for {
		rows, err := t.Next(ctx, q, foldBatch)
		if err != nil || len(rows) == 0 {
			return n, err
		}
		complete := t.reading == "" // else the read goes on
		k, err := apply(s, rows, changed)
		n += k
		if err != nil {
			return n, err
		}
		if complete {
			return n, nil
		}
	}
}

// foldBatch is how many rows Fold reads at a time.
const foldBatch = 10_000

// SaveSnapshot stores the partition's state as of the tail's position,
// in place of the last one.
func SaveSnapshot(ctx context.Context, q Querier, s *State, tail *Tail) error {
	position := tail.Position()
	if position == "" {
		return fmt.Errorf("journal partition %d: a snapshot between two parts of a read (read the tail to its end first)", tail.Partition)
	}
	begin, ok := q.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return errors.New("the journal's database handle opens no transaction")
	}
	err := pgx.BeginFunc(ctx, begin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM fairway_journal_snapshot_part WHERE partition = $1`, tail.Partition); err != nil {
			return err
		}
		part := 0
		err := s.snapshotParts(snapshotPartBytes, func(body []byte) error {
			part++
			_, err := tx.Exec(ctx, `INSERT INTO fairway_journal_snapshot_part (partition, part, body) VALUES ($1, $2, $3)`, tail.Partition, part, body)
			return err
		})
		if err != nil {
			return fmt.Errorf("part %d: %w", part, err)
		}
		// Its row last, taken when it is whole, with its mark for the
		// journal's retention (PruneJournal); its body is in the parts.
		_, err = tx.Exec(ctx, `WITH mark AS (INSERT INTO fairway_journal_mark (partition, tail) VALUES ($1, $2::pg_snapshot))
INSERT INTO fairway_journal_snapshot (partition, tail, taken, body) VALUES ($1, $2::pg_snapshot, clock_timestamp(), '')
ON CONFLICT (partition) DO UPDATE SET tail = EXCLUDED.tail, taken = EXCLUDED.taken, body = EXCLUDED.body`, tail.Partition, position)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing the snapshot of journal partition %d: %w", tail.Partition, err)
	}
	return nil
}

// snapshotPartBytes is the size of a snapshot's parts (SaveSnapshot; a
// variable for the tests).
var snapshotPartBytes = 4 << 20

// LoadSnapshot reads the partition's last snapshot and the tail that
// goes on from it: an empty state and a tail from the start when there
// is none.
func LoadSnapshot(ctx context.Context, q Querier, partition int16) (*State, *Tail, error) {
	var (
		position string
		body     []byte
	)
	// The snapshot's row and its parts, in order, as of one statement.
	rows, err := q.Query(ctx, `SELECT 0, tail::text, body FROM fairway_journal_snapshot WHERE partition = $1
UNION ALL SELECT part, NULL, body FROM fairway_journal_snapshot_part WHERE partition = $1
ORDER BY 1`, partition)
	if err == nil {
		var (
			n     int32
			first pgtype.Text
			part  []byte
		)
		found := false
		_, err = pgx.ForEachRow(rows, []any{&n, &first, &part}, func() error {
			if first.Valid {
				position, found = first.String, true
			}
			body = append(body, part...)
			return nil
		})
		if err == nil && !found {
			return NewState(), &Tail{Partition: partition}, nil
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the snapshot of journal partition %d: %w", partition, err)
	}
	s, err := Restore(body)
	if err != nil {
		return nil, nil, fmt.Errorf("journal partition %d: %w", partition, err)
	}
	return s, TailFrom(partition, position), nil
}

// SnapshotTaken is when the partition's last snapshot was taken, by
// PostgreSQL's clock (ok false: none was).
func SnapshotTaken(ctx context.Context, q Querier, partition int16) (taken time.Time, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT taken FROM fairway_journal_snapshot WHERE partition = $1`, partition).Scan(&taken)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("reading when journal partition %d's snapshot was taken: %w", partition, err)
	}
	return taken, true, nil
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

// ErrIDTaken is SubmitFresh's answer when an id of its items is taken
// (or named twice): nothing was committed.
var ErrIDTaken = errors.New("journal: an id of the submissions is taken")

// SubmitFresh appends items as submitted rows (of at most maxRowItems
// each) with their ids, in one transaction sent in one round trip, when
// none of their ids is taken: the ids' insert is a plain one, which a
// taken id (or an id twice in items) refuses, and then nothing is
// committed and it returns ErrIDTaken; Submit, in a transaction, then
// keeps the items whose ids are free. The plain insert costs PostgreSQL
// less than Submit's ON CONFLICT DO NOTHING (a speculative insertion,
// whose confirmation is 47 bytes of WAL a job), and the round trips of
// Submit's transaction (its BEGIN, the ids, the rows, the COMMIT) are
// one. Not in a caller's transaction: a refusal would end it.
func SubmitFresh(ctx context.Context, q Querier, partition int16, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	bodies, err := encodeRows(items)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	queueFresh(b, partition, items, bodies)
	b.Queue("COMMIT")
	if err := sendOwnTx(ctx, q, b); err != nil {
		if idTaken(err) {
			return ErrIDTaken
		}
		return fmt.Errorf("storing %d submissions: %w", len(items), err)
	}
	return nil
}

// sendOwnTx sends b, which begins a transaction and commits it, on one
// connection of q (a pool's, or q itself): when a statement fails, the
// transaction is rolled back on that connection before it goes back to
// the pool, which would close a connection returned in a failed
// transaction (and a new one costs PostgreSQL a process: submissions
// sent again and again, each refused on a taken id, would churn them).
func sendOwnTx(ctx context.Context, q Querier, b *pgx.Batch) error {
	p, ok := q.(interface {
		Acquire(context.Context) (*pgxpool.Conn, error)
	})
	if !ok {
		return q.SendBatch(ctx, b).Close()
	}
	conn, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	err = conn.SendBatch(ctx, b).Close()
	if err != nil && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		rollback, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(rollback, "ROLLBACK") // else Release closes it
	}
	return err
}

// queueFresh queues the plain insert of items' ids and the submitted rows
// of bodies (their encoding) on b, in a transaction b began.
func queueFresh(b *pgx.Batch, partition int16, items []Item, bodies [][]byte) {
	groups, ids := make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		groups[i], ids[i] = it.Group, it.ID
	}
	b.Queue(takeIDsSQL, groups, ids)
	b.Queue(appendSQL, partition, Submitted, bodies)
}

// takeIDsSQL takes the ids of new jobs, refusing one taken before (the
// plain insert of SubmitFresh and the hand-over: Submit takes them with
// ON CONFLICT DO NOTHING).
const takeIDsSQL = `INSERT INTO fairway_job_id (group_name, id) SELECT * FROM unnest($1::text[], $2::text[])`

// idTaken says whether err is takeIDsSQL refused on a taken id.
func idTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.TableName == "fairway_job_id"
}

// Submit appends submissions, in the caller's transaction, except those
// whose id is taken: each takes its id for good (fairway_job_id) in the
// same transaction, so that an id submitted before (its job live, ended
// or being submitted by a transaction not yet ended, which this one then
// waits for) makes no second job, and a submission sent again is
// dropped. An id twice in items is submitted once: the first one counts.
// It returns the submissions appended, in their order, as rows of at most
// maxRowItems (100,000).
func Submit(ctx context.Context, tx pgx.Tx, partition int16, items []Item) ([]Item, error) {
	if len(items) == 0 {
		return nil, nil
	}
	groups, ids := make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		groups[i], ids[i] = it.Group, it.ID
	}
	rows, err := tx.Query(ctx, `INSERT INTO fairway_job_id (group_name, id)
SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING RETURNING group_name, id`, groups, ids)
	if err != nil {
		return nil, fmt.Errorf("taking the ids of %d submissions: %w", len(items), err)
	}
	taken := map[fairway.JobRef]bool{}
	var ref fairway.JobRef
	if _, err := pgx.ForEachRow(rows, []any{&ref.Group, &ref.ID}, func() error { taken[ref] = true; return nil }); err != nil {
		return nil, fmt.Errorf("taking the ids of %d submissions: %w", len(items), err)
	}
	var kept []Item
	for _, it := range items {
		ref := fairway.JobRef{Group: it.Group, ID: it.ID}
		if taken[ref] {
			kept = append(kept, it)
			delete(taken, ref) // the first of an id twice in items
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	bodies, err := encodeRows(kept)
	if err != nil {
		return nil, err
	}
	if err := Append(ctx, tx, partition, Submitted, bodies...); err != nil {
		return nil, err
	}
	return kept, nil
}

// encodeRows encodes items as the bodies of rows of at most maxRowItems,
// in their order.
func encodeRows(items []Item) ([][]byte, error) {
	var bodies [][]byte
	for rest := items; len(rest) > 0; {
		chunk := rest[:min(len(rest), maxRowItems)]
		rest = rest[len(chunk):]
		body, err := Encode(chunk)
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}
