package journal_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(t.Context(), pgtest.NewDB(t))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func bodies(rows []journal.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, string(r.Body))
	}
	return out
}

// TestTailReadsPastARunningTransaction: A began writing first and runs on
// (a user's InsertTx in a slow transaction); B commits: the tail reads B
// at once, then A once it commits, each once; an aborted transaction's
// rows never. A transaction that runs holds no one back.
func TestTailReadsPastARunningTransaction(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	a, err := db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, a, 0, journal.Submitted, []byte("a")))
	b, err := db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, b, 0, journal.Submitted, []byte("b1"), []byte("b2")))
	aborted, err := db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, aborted, 0, journal.Submitted, []byte("never")))
	require.NoError(t, b.Commit(ctx))

	tail := &journal.Tail{}
	rows, err := tail.Next(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"b1", "b2"}, bodies(rows), "a running transaction held the tail back")
	rows, err = tail.Next(ctx, db, 0)
	require.NoError(t, err)
	require.Empty(t, bodies(rows), "a row read twice, or one of a transaction that runs")

	require.NoError(t, a.Commit(ctx))
	require.NoError(t, aborted.Rollback(ctx))
	rows, err = tail.Next(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, bodies(rows))
	rows, err = tail.Next(ctx, db, 0)
	require.NoError(t, err)
	require.Empty(t, rows, "a row read twice")

	// From the position, a new tail reads what comes after it only.
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, []byte("c")))
	rows, err = journal.TailFrom(0, tail.Position()).Next(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, bodies(rows))
}

// TestTailOrdersAnEffectAfterItsCause: a claim's transaction writes
// first (it takes its xid), then reads a submission committed after that
// and appends its claim: the tail reads the claim after the submission,
// although the claim's transaction has the smaller xid (the row engine's
// claims did this, and the journal's fold dropped the claim as one of a
// job it did not know yet).
func TestTailOrdersAnEffectAfterItsCause(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	lease, ok, err := journal.Acquire(ctx, db, 0, "leader", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	claim, err := db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, journal.AppendFenced(ctx, claim, 0, lease.Epoch, journal.Released, []byte("claim's first write")))
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, []byte("submission"))) // commits, with a later xid
	require.NoError(t, journal.AppendFenced(ctx, claim, 0, lease.Epoch, journal.Claimed, []byte("claim of the submission")))
	require.NoError(t, claim.Commit(ctx))
	rows, err := (&journal.Tail{}).Next(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"claim's first write", "submission", "claim of the submission"}, bodies(rows))
	require.Greater(t, rows[1].XID, rows[2].XID, "the claim's xid is the smaller: the case this test is about")
}

// TestTailReadsEachCommittedRowOnceInCausalOrder: writers append from
// many transactions of random lengths that commit in any order (some roll
// back) while a reader tails, with a limit that cuts reads: every
// committed row is read exactly once, no rolled-back row ever, and each
// writer's rows (its transactions follow each other, as a job's changes
// do) in its order.
func TestTailReadsEachCommittedRowOnceInCausalOrder(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	const writers, txs = 8, 40
	var mu sync.Mutex
	committed := map[string]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1)) //nolint:gosec // G115: w < writers (8)
			for i := range txs {
				tx, err := db.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var bs [][]byte
				for k := range 1 + rng.IntN(3) {
					bs = append(bs, fmt.Appendf(nil, "w%d-t%03d-r%d", w, i, k))
				}
				if err := journal.Append(ctx, tx, 0, journal.Submitted, bs...); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // a transaction's length: part of the workload
				if rng.IntN(10) == 0 {
					_ = tx.Rollback(ctx)
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, b := range bs {
					committed[string(b)] = true
				}
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tail := &journal.Tail{}
	var read []string
	finished := false
	for {
		rows, err := tail.Next(ctx, db, 7)
		require.NoError(t, err)
		read = append(read, bodies(rows)...)
		if finished && len(rows) == 0 {
			break
		}
		select {
		case <-done:
			finished = true
		default:
		}
	}
	seen := map[string]bool{}
	last := map[string]string{}
	for _, b := range read {
		require.False(t, seen[b], "row %s read twice", b)
		seen[b] = true
		require.True(t, committed[b], "row %s read but never committed", b)
		writer := b[:2]
		require.Less(t, last[writer], b, "writer %s's rows out of order", writer)
		last[writer] = b
	}
	require.Len(t, seen, len(committed), "committed rows never read")
}

// TestAFencedLeaderAppendsNothing: a leader's appends carry its epoch and
// are refused once another coordinator took the lease, also from a
// transaction that began while it still led (a leader frozen past its
// lease, then resumed).
func TestAFencedLeaderAppendsNothing(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	l1, ok, err := journal.Acquire(ctx, db, 0, "c1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, l1.Epoch)
	renewed, ok, err := journal.Acquire(ctx, db, 0, "c1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, l1.Epoch, renewed.Epoch, "a renewal keeps the epoch")
	_, ok, err = journal.Acquire(ctx, db, 0, "c2", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "c2 took a lease c1 holds")
	require.NoError(t, journal.AppendFenced(ctx, db, 0, l1.Epoch, "claimed", []byte("by c1")))

	frozen, err := db.Begin(ctx) // c1 decides a claim, then freezes
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE fairway_journal_lease SET until = now() - interval '1 second' WHERE partition = 0`) // its lease runs out
	require.NoError(t, err)
	l2, ok, err := journal.Acquire(ctx, db, 0, "c2", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 2, l2.Epoch)
	require.ErrorIs(t, journal.AppendFenced(ctx, frozen, 0, l1.Epoch, "claimed", []byte("by deposed c1")), journal.ErrFenced)
	require.NoError(t, frozen.Commit(ctx))
	require.NoError(t, journal.AppendFenced(ctx, db, 0, l2.Epoch, "claimed", []byte("by c2")))
	_, ok, err = journal.Acquire(ctx, db, 0, "c1", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "the deposed leader took its lease back")

	rows, err := (&journal.Tail{}).Next(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"by c1", "by c2"}, bodies(rows))
	require.True(t, slices.IsSortedFunc(rows, func(a, b journal.Row) int { return int(a.Epoch - b.Epoch) }))
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal WHERE epoch = 1`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestOnlyTheLeaderAppendsWhatItsOrderDecides: any coordinator appends
// submissions; the kinds whose order changes the fold (a cancel and a
// claim of one job, say) are refused from anyone but the leader, and
// nothing is written.
func TestOnlyTheLeaderAppendsWhatItsOrderDecides(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	for _, kind := range []journal.Kind{journal.Claimed, journal.Started, journal.Ended, journal.Cancel, journal.Released, journal.Resolved, journal.Paused, journal.Retried} {
		err := journal.Append(ctx, db, 0, kind, []byte("by anyone"))
		require.ErrorContains(t, err, "only the partition's leader appends them", "%s", kind)
	}
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, []byte("a submission")))
	rows, err := (&journal.Tail{}).Next(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a submission"}, bodies(rows))
}

// TestADeposedLeadersAppendCommitsBeforeItsSuccessorOrNever: c1 appends a
// claim in a transaction and freezes before its commit (SIGSTOP, a long
// GC pause) while its lease runs out. c2 takes the lease over and reads
// the journal at once, as a successor does before it acts. If c1 resumes
// and commits, its row must be in what c2 read: c2's takeover waited for
// that transaction. If c1 stays frozen, PostgreSQL ends its transaction
// once it idled for the lease's TTL, the takeover goes on, and c1's row
// never commits. Without the lease's lock, c2 took over at once, read
// the journal without c1's row, and c1's commit then succeeded: a claim
// its successor never knew of.
func TestADeposedLeadersAppendCommitsBeforeItsSuccessorOrNever(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, resumes := range []bool{true, false} {
		t.Run(fmt.Sprint("resumes=", resumes), func(t *testing.T) {
			ctx := t.Context()
			db := pool(t)
			l1, ok, err := journal.Acquire(ctx, db, 0, "c1", ttl)
			require.NoError(t, err)
			require.True(t, ok)
			frozen, err := db.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = frozen.Rollback(context.Background()) }()
			const c1Row = "by c1, frozen before its commit"
			// Ended by PostgreSQL after ttl idle; one that resumes does so
			// within 10 s, whatever the machine's load.
			idle := ttl
			if resumes {
				idle = 10 * time.Second
			}
			require.NoError(t, journal.AppendFencedIdle(ctx, frozen, 0, l1.Epoch, idle, journal.Claimed, []byte(c1Row)))

			type takeover struct {
				lease journal.Lease
				read  []string // the successor's first read of the journal
			}
			took := make(chan takeover, 1)
			go func() {
				for ctx.Err() == nil {
					l2, ok, err := journal.Acquire(ctx, db, 0, "c2", 10*time.Second)
					if err == nil && ok {
						rows, err := (&journal.Tail{}).Next(ctx, db, 0)
						if err != nil {
							t.Error(err)
						}
						took <- takeover{l2, bodies(rows)}
						return
					}
				}
			}()
			var c2 takeover
			committed := false
			if resumes {
				// c1 resumes once c2's takeover waits for it, or has
				// happened.
				waiting := func() bool {
					var n int
					require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n))
					return n > 0
				}
				tookFirst := false
				require.Eventually(t, func() bool {
					select {
					case c2 = <-took:
						tookFirst = true
						return true
					default:
						return waiting()
					}
				}, 10*time.Second, time.Millisecond)
				committed = frozen.Commit(ctx) == nil
				require.True(t, committed, "c1's commit")
				if !tookFirst {
					c2 = recvTakeover(t, took)
				}
			} else {
				c2 = recvTakeover(t, took)
				require.Error(t, frozen.Commit(ctx), "PostgreSQL ended the frozen transaction")
			}
			require.EqualValues(t, 2, c2.lease.Epoch)
			require.Equal(t, committed, slices.Contains(c2.read, c1Row),
				"c1's row committed=%v, but c2's first read after its takeover was %q", committed, c2.read)
			require.ErrorIs(t, journal.AppendFenced(ctx, db, 0, l1.Epoch, journal.Claimed, []byte("by c1 after")), journal.ErrFenced)
			rows, err := (&journal.Tail{}).Next(ctx, db, 0)
			require.NoError(t, err)
			require.Equal(t, c2.read, bodies(rows), "nothing committed after c2's first read")
		})
	}
}

func recvTakeover[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("c2 never took the lease over")
		panic("unreachable")
	}
}

// TestASubmissionTakesItsIdForGood: an id is submitted once: sent again
// (its job live or ended alike: the id stays taken until retention frees
// it) or twice in one batch, it makes no second job, and the submission
// that brings it is kept for its other ids. A transaction that submits an id another has
// submitted, not yet committed, waits for it: the id is taken when that
// one commits, and free again when it rolls back.
func TestASubmissionTakesItsIdForGood(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submit := func(q interface {
		Begin(context.Context) (pgx.Tx, error)
	}, ids ...string) []string {
		t.Helper()
		tx, err := q.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var items []journal.Item
		for _, id := range ids {
			items = append(items, journal.Item{Group: "g", ID: id, Task: "t"})
		}
		kept, err := journal.Submit(ctx, tx, 0, items)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		var out []string
		for _, it := range kept {
			out = append(out, it.ID)
		}
		return out
	}
	require.Equal(t, []string{"a", "b"}, submit(db, "a", "b", "a"), "an id twice in a batch: the first")
	require.Equal(t, []string{"c"}, submit(db, "b", "c"), "b waits: sent again, dropped")
	require.Nil(t, submit(db, "a"))

	// In flight: tx1 takes d and has not committed; tx2 waits for it.
	tx1, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = journal.Submit(ctx, tx1, 0, []journal.Item{{Group: "g", ID: "d", Task: "t"}})
	require.NoError(t, err)
	second := make(chan []string)
	go func() { second <- submit(db, "d", "e") }()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO fairway_job_id%'`).Scan(&waiting))
		return waiting == 1
	}, 10*time.Second, 5*time.Millisecond, "the second submission waits for the first's transaction")
	select {
	case got := <-second:
		t.Fatalf("a submission of an id another transaction holds did not wait: %v", got)
	default:
	}
	require.NoError(t, tx1.Rollback(ctx))
	require.Equal(t, []string{"d", "e"}, <-second, "the id is free once the first rolled back")

	s, tail := journal.NewState(), journal.TailFrom(0, "")
	_, err = tail.Fold(ctx, db, s)
	require.NoError(t, err)
	var live []string
	for ref := range s.Jobs.All() {
		live = append(live, ref.ID)
	}
	require.ElementsMatch(t, []string{"a", "b", "c", "d", "e"}, live, "one job each")
	var rows int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal WHERE kind = 'submitted'`).Scan(&rows))
	require.Equal(t, 3, rows, "nothing appended for a submission of taken ids alone")
}

// TestATailReadQueuedInABatchFoldsAsAFold: a read queued at the end of a
// batch (Tail.Queue, as the leader's append queues it after its commit)
// brings the rows a Fold would read, and FoldRead folds them to the same
// state; a read queued where the tail no longer stands (it moved on
// since) is not applied again, and a read its batch did not run is
// replaced by a read of FoldRead's own.
func TestATailReadQueuedInABatchFoldsAsAFold(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 6, "acme", "globex")
	tail, s := &journal.Tail{}, journal.NewState()
	b := &pgx.Batch{}
	r := tail.Queue(b)
	require.NotNil(t, r)
	require.NoError(t, db.SendBatch(ctx, b).Close())
	n, err := tail.FoldRead(ctx, db, s, r, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the submitted row, read by the batch")
	require.Equal(t, 6, s.Jobs.Len())

	// Queued, run, then the tail moves on by a Fold: the read is stale.
	b = &pgx.Batch{}
	stale := tail.Queue(b)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, mustEncode(t, journal.Item{Group: "acme", ID: "late", Task: "t"})))
	require.NoError(t, db.SendBatch(ctx, b).Close())
	n, err = tail.Fold(ctx, db, s)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = tail.FoldRead(ctx, db, s, stale, nil)
	require.NoError(t, err)
	require.Zero(t, n, "a stale read is not folded again")
	require.Equal(t, 7, s.Jobs.Len())

	// A read its batch never ran (an earlier statement failed).
	b = &pgx.Batch{}
	b.Queue("SELECT 1/0")
	unrun := tail.Queue(b)
	require.Error(t, db.SendBatch(ctx, b).Close())
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, mustEncode(t, journal.Item{Group: "globex", ID: "later", Task: "t"})))
	n, err = tail.FoldRead(ctx, db, s, unrun, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "read anew")
	require.Equal(t, 8, s.Jobs.Len())
	fresh := journal.NewState()
	_, err = (&journal.Tail{}).Fold(ctx, db, fresh)
	require.NoError(t, err)
	require.Equal(t, fresh.Jobs, s.Jobs)
}

func mustEncode(t *testing.T, items ...journal.Item) []byte {
	t.Helper()
	body, err := journal.Encode(items)
	require.NoError(t, err)
	return body
}

// TestAReadOfTheTailIsBoundedInBytes: a read returns rows up to the first
// whose bodies with those before it reach the bound (at least one, even
// one larger than the bound), and the next reads go on with the same
// snapshot, so that a backlog of large batches is read a few at a time,
// each row once and in order; a fold reads it all.
func TestAReadOfTheTailIsBoundedInBytes(t *testing.T) {
	ctx, db := t.Context(), pool(t)
	journal.SetReadBytes(t, 2500)
	var want []int64
	for i := range 7 {
		size := 1000
		if i == 3 {
			size = 6000 // larger than the bound alone
		}
		body, err := journal.Encode([]journal.Item{{Group: "g", ID: fmt.Sprint("j", i), Task: "t", Args: []byte(`"` + strings.Repeat("x", size) + `"`)}})
		require.NoError(t, err)
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	}
	all, err := (&journal.Tail{}).Next(ctx, db, 1)
	require.NoError(t, err)
	first := all[0].ID
	for i := range 7 {
		want = append(want, first+int64(i))
	}
	tail := &journal.Tail{}
	var sizes []int
	var got []int64
	for {
		rows, err := tail.Next(ctx, db, 0)
		require.NoError(t, err)
		if len(rows) == 0 {
			break
		}
		sizes = append(sizes, len(rows))
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if len(sizes) > 10 {
			t.Fatal("the reads never end")
		}
	}
	require.Equal(t, want, got, "each row once, in order")
	require.Equal(t, []int{3, 1, 3}, sizes, "rows of about 1 KB read until 2.5 KB is reached, the one of 6 KB alone")
	require.NotEmpty(t, tail.Position())

	s := journal.NewState()
	n, err := (&journal.Tail{}).Fold(ctx, db, s)
	require.NoError(t, err)
	require.Equal(t, 7, n)
	require.Equal(t, 7, s.Jobs.Len())
}

// TestManySubmissionsAreSeveralRows: a row holds at most maxRowItems
// items (a job holds its item's index in 20 bits); Submit writes more as
// several rows, in their order, and each job reads its own item back.
func TestManySubmissionsAreSeveralRows(t *testing.T) {
	ctx, db := t.Context(), pool(t)
	journal.SetMaxRowItems(t, 10)
	items := make([]journal.Item, 25)
	for i := range items {
		items[i] = journal.Item{Group: "g", ID: fmt.Sprintf("j%02d", i), Task: "t", Args: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	_, err := journal.Encode(items)
	require.ErrorContains(t, err, "a journal row holds at most 10 items, not 25")
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	kept, err := journal.Submit(ctx, tx, 0, items)
	require.NoError(t, err)
	require.Len(t, kept, 25)
	require.NoError(t, tx.Commit(ctx))

	rows, err := (&journal.Tail{}).Next(ctx, db, 0)
	require.NoError(t, err)
	require.Len(t, rows, 3, "25 submissions in rows of at most 10")
	s := journal.NewState()
	for _, r := range rows {
		_, err := s.Apply(r)
		require.NoError(t, err)
	}
	for i, it := range items {
		j := s.Jobs.Get(fairway.JobRef{Group: "g", ID: it.ID})
		require.NotNil(t, j)
		require.Equal(t, rows[i/10].ID, j.Row(), "job %d's row", i)
		require.EqualValues(t, i%10, j.Index(), "job %d's index in its row", i)
	}
}

// TestAFreshSubmissionIsAllOrNothing: SubmitFresh stores a batch whose
// ids are all free, in rows of at most maxRowItems, with its ids taken;
// a batch with one id taken, or an id twice, stores nothing (ErrIDTaken)
// and takes no id, and Submit then keeps its free ones.
func TestAFreshSubmissionIsAllOrNothing(t *testing.T) {
	ctx, db := t.Context(), pool(t)
	journal.SetMaxRowItems(t, 10)
	batch := func(from, n int) []journal.Item {
		items := make([]journal.Item, n)
		for i := range items {
			items[i] = journal.Item{Group: "g", ID: fmt.Sprintf("j%02d", from+i), Task: "t"}
		}
		return items
	}
	counts := func() (rows, ids int) {
		require.NoError(t, db.QueryRow(ctx, `SELECT (SELECT count(*) FROM fairway_journal), (SELECT count(*) FROM fairway_job_id)`).Scan(&rows, &ids))
		return rows, ids
	}
	require.NoError(t, journal.SubmitFresh(ctx, db, 0, batch(0, 25)))
	rows, ids := counts()
	require.Equal(t, 3, rows, "25 submissions in rows of at most 10")
	require.Equal(t, 25, ids)

	overlapping := batch(20, 10) // j20..j24 taken
	opened := db.Stat().NewConnsCount()
	for range 5 {
		require.ErrorIs(t, journal.SubmitFresh(ctx, db, 0, overlapping), journal.ErrIDTaken)
	}
	twice := append(batch(40, 2), batch(40, 1)...)
	require.ErrorIs(t, journal.SubmitFresh(ctx, db, 0, twice), journal.ErrIDTaken)
	require.Equal(t, opened, db.Stat().NewConnsCount(), "a refusal keeps its connection (rolled back, not closed)")
	rows, ids = counts()
	require.Equal(t, 3, rows, "nothing stored")
	require.Equal(t, 25, ids, "no id taken")

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	kept, err := journal.Submit(ctx, tx, 0, overlapping)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, kept, 5, "the free ones")
	require.Equal(t, "j25", kept[0].ID)

	s := journal.NewState()
	_, err = (&journal.Tail{}).Fold(ctx, db, s)
	require.NoError(t, err)
	require.Equal(t, 30, s.Jobs.Len())
}
