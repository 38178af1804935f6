package journal_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// balanced is a coordinator of the balance test: a Balancer and a Leader
// per partition, as a coordinator over several partitions runs them.
type balanced struct {
	name    string
	leaders []*journal.Leader
	stop    func()
}

func startBalanced(t testing.TB, db journal.Querier, name string, partitions int) *balanced {
	t.Helper()
	dbs := make([]journal.Querier, partitions)
	for p := range dbs {
		dbs[p] = db
	}
	return startBalancedOver(t, dbs, name)
}

// startBalancedOver is startBalanced with each partition in its database,
// dbs[p]; the coordinators say they are alive in dbs[0].
func startBalancedOver(t testing.TB, dbs []journal.Querier, name string) *balanced {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	b := journal.NewBalancer(dbs[0], journal.BalancerConfig{Holder: name, Partitions: len(dbs), Databases: dbs})
	c := &balanced{name: name}
	var wg sync.WaitGroup
	wg.Go(func() { b.Run(ctx) })
	for p, db := range dbs {
		l := journal.NewLeader(db, journal.LeaderConfig{Partition: int16(p), Holder: name, Balance: b, SnapshotEvery: time.Hour}) //nolint:gosec // G115: a few partitions
		c.leaders = append(c.leaders, l)
		wg.Go(func() { l.Run(ctx) })
	}
	// Stopped as a process killed: nothing given up, nothing said.
	c.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(c.stop)
	return c
}

// leads lists the partitions c leads.
func (c *balanced) leads() []int {
	var out []int
	for p, l := range c.leaders {
		if l.View(func(*journal.State, journal.Lease) {}) {
			out = append(out, p)
		}
	}
	return out
}

// untilLed waits until every coordinator of cs leads want[i] partitions and
// together they lead every partition once, and says how long it took.
func untilLed(t testing.TB, what string, partitions int, cs []*balanced, want []int) time.Duration {
	t.Helper()
	require.Len(t, want, len(cs))
	began := time.Now()
	var got []string
	for time.Since(began) < 30*time.Second {
		got = got[:0]
		all := map[int]int{}
		ok := true
		for i, n := range want {
			l := cs[i].leads()
			got = append(got, fmt.Sprintf("%s %v", cs[i].name, l))
			for _, p := range l {
				all[p]++
			}
			ok = ok && len(l) == n
		}
		for p := range partitions {
			ok = ok && all[p] == 1
		}
		if ok {
			return time.Since(began)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within 30 s: %v", what, got)
	return 0
}

// TestLeasesSpreadOverTheCoordinators: four partitions' leases over the
// coordinators that run: one leads them all; a second that joins takes
// its half; the first killed (nothing given up) leaves them all to the
// second within the lease and a beat; a third that joins takes its half.
// Every partition has one leader at the end of each step, and the epochs
// only grow (each new leader fenced the last).
func TestLeasesSpreadOverTheCoordinators(t *testing.T) {
	db := pool(t)
	const partitions = 4
	c1 := startBalanced(t, db, "c1", partitions)
	took := untilLed(t, "c1 alone leads every partition", partitions, []*balanced{c1}, []int{4})
	t.Logf("c1 alone: leads the 4 partitions %v after its start", took.Round(time.Millisecond))

	c2 := startBalanced(t, db, "c2", partitions)
	took = untilLed(t, "c2 joins: two each", partitions, []*balanced{c1, c2}, []int{2, 2})
	t.Logf("c2 joins: two partitions each %v after its start", took.Round(time.Millisecond))

	epochs := func() map[int16]int64 {
		out := map[int16]int64{}
		rows, err := db.Query(t.Context(), `SELECT partition, epoch FROM fairway_journal_lease`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var p int16
			var e int64
			require.NoError(t, rows.Scan(&p, &e))
			out[p] = e
		}
		return out
	}
	before := epochs()
	orphaned := c1.leads()
	c1.stop()
	took = untilLed(t, "c1 killed: c2 leads all", partitions, []*balanced{c2}, []int{4})
	t.Logf("c1 killed: c2 leads its partitions %v %v after the kill", orphaned, took.Round(time.Millisecond))
	after := epochs()
	for _, p := range orphaned {
		require.Greater(t, after[int16(p)], before[int16(p)], "partition %d: the new leader's epoch fences the old", p) //nolint:gosec // G115: a few partitions
	}

	c3 := startBalanced(t, db, "c3", partitions)
	took = untilLed(t, "c3 joins: two each", partitions, []*balanced{c2, c3}, []int{2, 2})
	t.Logf("c3 joins: two partitions each %v after its start", took.Round(time.Millisecond))
}

// TestLeasesSpreadOverTheCoordinatorsAndDatabases: four partitions in two
// databases (0 and 2 in the first, which holds the coordinators' rows, 1
// and 3 in the second), each lease in its partition's database: a
// second coordinator that joins takes its half, and the first killed
// leaves them all to it. A Balancer reading the first database's leases
// alone took the second's partitions for never taken: the joining one
// tried them (held by the first) and never got its share.
func TestLeasesSpreadOverTheCoordinatorsAndDatabases(t *testing.T) {
	a, b := pool(t), pool(t)
	dbs := []journal.Querier{a, b, a, b}
	c1 := startBalancedOver(t, dbs, "c1")
	untilLed(t, "c1 alone leads every partition", len(dbs), []*balanced{c1}, []int{4})
	c2 := startBalancedOver(t, dbs, "c2")
	took := untilLed(t, "c2 joins: two each", len(dbs), []*balanced{c1, c2}, []int{2, 2})
	t.Logf("c2 joins: two partitions each %v after its start", took.Round(time.Millisecond))
	c1.stop()
	took = untilLed(t, "c1 killed: c2 leads all", len(dbs), []*balanced{c2}, []int{4})
	t.Logf("c1 killed: c2 leads every partition %v after the kill", took.Round(time.Millisecond))
	// c2 keeps them: c1's row says it is alive until Gone after its last
	// beat, but a coordinator whose leases ran out is not counted in the
	// shares (before, c2 gave one back to it at the next beat, and took
	// it again after Grace).
	const gone = 3 * time.Second // BalancerConfig.Gone's default
	for end := time.Now().Add(gone); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		require.Len(t, c2.leads(), len(dbs), "c2 gave a partition back to the dead c1")
	}
	var n int
	require.NoError(t, b.QueryRow(t.Context(), `SELECT count(*) FROM fairway_journal_lease WHERE partition IN (1, 3) AND holder = 'c2'`).Scan(&n))
	require.Equal(t, 2, n, "the second database holds its partitions' leases")
}

// TestALeaseGivenUpWaitsForTheCoordinatorBelowItsShare: a lease given up
// is left to the coordinator below its share for Grace, then any takes it
// (that one may have died meanwhile); a lease run out without being given
// up is taken at once, whatever the shares.
func TestALeaseGivenUpWaitsForTheCoordinatorBelowItsShare(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	// c1 holds partition 0; "ghost" is alive and holds nothing: each has
	// a share of one of the two partitions.
	_, _, err := journal.Acquire(ctx, db, 0, "c1", time.Hour)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO fairway_coordinator (holder, seen) VALUES ('ghost', now() + interval '1 hour')`)
	require.NoError(t, err)
	lease, ok, err := journal.Acquire(ctx, db, 1, "c1", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	// Before the call: the grace runs from PostgreSQL's now() in Yield's
	// transaction, which a time taken after it would come later than (CI
	// saw 1.994 s against 2 s).
	given := time.Now()
	yielded, err := journal.Yield(ctx, db, 1, "c1", time.Second)
	require.NoError(t, err)
	require.True(t, yielded)
	// Given up with the next epoch: an append of the epoch before is
	// refused, whenever its transaction began.
	body, err := journal.Encode([]journal.Item{{Group: "g", ID: "late", Attempt: 1, Executor: "e", Instance: "i"}})
	require.NoError(t, err)
	require.ErrorIs(t, journal.AppendFenced(ctx, db, 1, lease.Epoch, journal.Claimed, body), journal.ErrFenced)
	yielded, err = journal.Yield(ctx, db, 1, "c1", time.Second)
	require.NoError(t, err)
	require.False(t, yielded, "c1 holds it no more")

	b := journal.NewBalancer(db, journal.BalancerConfig{Holder: "c1", Partitions: 2, Beat: 20 * time.Millisecond, Grace: 2 * time.Second})
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.Run(bctx)
	require.Eventually(t, func() bool { return b.Take(1) }, 10*time.Second, 10*time.Millisecond, "taken after the grace")
	require.GreaterOrEqual(t, time.Since(given), 2*time.Second, "left to the coordinator below its share for the grace")

	// Run out without being given up: its holder died. A balancer whose
	// grace is an hour takes it only as a lease orphaned.
	cancel()
	_, err = db.Exec(ctx, `UPDATE fairway_journal_lease SET holder = 'dead', until = now() WHERE partition = 1`)
	require.NoError(t, err)
	b = journal.NewBalancer(db, journal.BalancerConfig{Holder: "c1", Partitions: 2, Beat: 20 * time.Millisecond, Grace: time.Hour})
	bctx, cancel = context.WithCancel(ctx)
	defer cancel()
	go b.Run(bctx)
	require.Eventually(t, func() bool { return b.Take(1) }, 10*time.Second, 10*time.Millisecond, "an orphaned lease is taken whatever the shares")
}

// TestAResigningLeaderGivesItsLeaseUp: a leader that resigns (its
// coordinator stops) leaves its lease run out with no holder at once and
// takes it no more; a follower takes it with a higher epoch at its next
// try, though the lease would have lasted an hour.
func TestAResigningLeaderGivesItsLeaseUp(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	cfg := journal.LeaderConfig{TTL: time.Hour, Renew: 20 * time.Millisecond, Poll: 10 * time.Millisecond, SnapshotEvery: time.Hour}
	leads := func(l *journal.Leader) (lease journal.Lease, ok bool) {
		ok = l.View(func(_ *journal.State, le journal.Lease) { lease = le })
		return lease, ok
	}
	c1Cfg := cfg
	c1Cfg.Holder = "c1"
	c1 := journal.NewLeader(db, c1Cfg)
	runLeader(t, c1)
	require.Eventually(t, func() bool { _, ok := leads(c1); return ok }, 10*time.Second, 5*time.Millisecond)
	before, _ := leads(c1)

	require.NoError(t, c1.Resign(ctx))
	_, ok := leads(c1)
	require.False(t, ok, "it leads no more")
	// Ten of its renewals: it takes the lease it gave up no more (an
	// absence, so a wait).
	time.Sleep(10 * cfg.Renew)
	holder, err := journal.LeaseHolder(ctx, db, 0)
	require.NoError(t, err)
	require.Empty(t, holder, "nobody holds it")
	require.NoError(t, c1.Resign(ctx), "resigning again does nothing")

	c2Cfg := cfg
	c2Cfg.Holder = "c2"
	c2 := journal.NewLeader(db, c2Cfg)
	runLeader(t, c2)
	require.Eventually(t, func() bool { _, ok := leads(c2); return ok }, 10*time.Second, 5*time.Millisecond, "c2 takes the lease given up")
	after, _ := leads(c2)
	require.Greater(t, after.Epoch, before.Epoch)
}

// BenchmarkLeaseHandover measures, over four partitions, how long a
// coordinator that joins one running alone takes to have its half, and
// how long after the first is killed (nothing given up) the second leads
// them all (the bounds: 10 s and 3 s).
//
//	go test -run XXX -bench LeaseHandover -benchtime 3x ./internal/journal/
func BenchmarkLeaseHandover(b *testing.B) {
	db := pool(b)
	const partitions = 4
	var join, handover time.Duration
	for i := range b.N {
		_, err := db.Exec(b.Context(), `DELETE FROM fairway_journal_lease; DELETE FROM fairway_coordinator`)
		require.NoError(b, err)
		c1 := startBalanced(b, db, fmt.Sprintf("c1-%d", i), partitions)
		untilLed(b, "c1 alone", partitions, []*balanced{c1}, []int{4})
		c2 := startBalanced(b, db, fmt.Sprintf("c2-%d", i), partitions)
		join += untilLed(b, "c2 joins", partitions, []*balanced{c1, c2}, []int{2, 2})
		c1.stop()
		handover += untilLed(b, "c1 killed", partitions, []*balanced{c2}, []int{4})
		c2.stop()
	}
	b.ReportMetric(join.Seconds()/float64(b.N), "join_s")
	b.ReportMetric(handover.Seconds()/float64(b.N), "handover_s")
}

// gate is a Balance that takes and keeps every partition while open.
type gate struct{ open atomic.Bool }

func (g *gate) Take(int16) bool { return g.open.Load() }
func (g *gate) Keep(int16) bool { return g.open.Load() }

// TestContendTriesTheLeaseNow: a leader whose Balance changed its mind
// takes the lease, and gives it up, as soon as it is told (Contend), not
// at its next renewal (an hour here): the partitions a coordinator leads
// with its first follow it at once.
func TestContendTriesTheLeaseNow(t *testing.T) {
	db := pool(t)
	g := &gate{}
	leading := make(chan bool, 4)
	l := journal.NewLeader(db, journal.LeaderConfig{Partition: 1, Holder: "c1", Balance: g, Renew: time.Hour, TTL: 3 * time.Hour,
		SnapshotEvery: time.Hour, Leading: func(on bool) { leading <- on }})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-l.Restored() // after its first try, which the gate refused
	require.False(t, l.View(func(*journal.State, journal.Lease) {}), "the gate said no")

	told := func(want bool) {
		t.Helper()
		select {
		case on := <-leading:
			require.Equal(t, want, on)
		case <-time.After(20 * time.Second):
			t.Fatalf("not told leading=%v within 20 s of Contend", want)
		}
	}
	g.open.Store(true)
	l.Contend()
	told(true)
	g.open.Store(false)
	l.Contend()
	told(false)
}
