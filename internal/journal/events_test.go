package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestEventsOfAJobsLife: a job's rows make its events, one per change of
// state, each naming the state before, the attempt, the executor that
// holds (or took) the job and the row's time, under ids made of the row's;
// a change of priority makes none.
func TestEventsOfAJobsLife(t *testing.T) {
	s := journal.NewState()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var got []fairway.Event
	step := func(id int64, kind journal.Kind, it journal.Item) {
		r := row(t, id, kind, it)
		r.At = at.Add(time.Duration(id) * time.Second)
		got = append(got, journal.EventsOf(3, r, apply(t, s, r))...)
	}
	held := journal.Item{Group: "g", ID: "a", Attempt: 1, Executor: "e1", Instance: "i1"}
	step(10, journal.Submitted, journal.Item{Group: "g", ID: "a", Task: "mail", MaxRetries: 2})
	step(11, journal.Priority, journal.Item{Group: "g", ID: "a", Priority: "high"})
	step(12, journal.Claimed, held)
	step(13, journal.Started, held)
	failed := held
	failed.Outcome, failed.Error = journal.OutcomeError, "boom"
	step(14, journal.Ended, failed)
	again := journal.Item{Group: "g", ID: "a", Attempt: 2, Executor: "e2", Instance: "i2"}
	step(15, journal.Claimed, again)
	again.Outcome = journal.OutcomeSuccess
	step(16, journal.Ended, again)

	ev := func(id string, sec int, from, to fairway.State, attempt int, executor, msg string) fairway.Event {
		t := at.Add(time.Duration(sec) * time.Second)
		return fairway.Event{ID: id + "." + strconv.FormatInt(t.UnixMicro(), 36), JobID: "a", Group: "g", Task: "mail", State: to, PreviousState: from, Attempt: attempt,
			Executor: executor, Error: msg, Time: t}
	}
	require.Equal(t, []fairway.Event{
		ev("j3.10.0", 10, "", fairway.StateWaiting, 0, "", ""),
		ev("j3.12.0", 12, fairway.StateWaiting, fairway.StateScheduled, 1, "e1", ""),
		ev("j3.13.0", 13, fairway.StateScheduled, fairway.StateRunning, 1, "e1", ""),
		ev("j3.14.0", 14, fairway.StateRunning, fairway.StateStuck, 1, "e1", "boom"),
		ev("j3.15.0", 15, fairway.StateStuck, fairway.StateScheduled, 2, "e2", ""),
		ev("j3.16.0", 16, fairway.StateScheduled, fairway.StateSuccess, 2, "e2", ""),
	}, got)
}

// recorder is a Publish that keeps what it was given, or fails.
type recorder struct {
	mu     sync.Mutex
	events []fairway.Event
	sizes  []int // of each call
	fail   bool
	// folded, when set, is the leader's Leader.Folded: foldedBefore says
	// of each call whether a fold came between it and the call before.
	folded       func() <-chan struct{}
	lastFold     <-chan struct{}
	foldedBefore []bool
}

func (r *recorder) publish(_ context.Context, evs []fairway.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.folded != nil {
		came := false
		if r.lastFold != nil {
			select {
			case <-r.lastFold:
				came = true
			default:
			}
		}
		r.foldedBefore = append(r.foldedBefore, came)
		r.lastFold = r.folded()
	}
	if r.fail {
		return errors.New("JetStream did not answer")
	}
	r.events = append(r.events, evs...)
	r.sizes = append(r.sizes, len(evs))
	return nil
}

func (r *recorder) byID() map[string]fairway.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]fairway.Event{}
	for _, ev := range r.events {
		out[ev.ID] = ev
	}
	return out
}

// journalEvents are the events of partition 0's journal, folded from
// scratch: what publishing must give, by id.
func journalEvents(t *testing.T, db *pgxpool.Pool) map[string]fairway.Event {
	t.Helper()
	s, tail := journal.NewState(), journal.TailFrom(0, "")
	out := map[string]fairway.Event{}
	for {
		rows, err := tail.Next(t.Context(), db, 0)
		require.NoError(t, err)
		if len(rows) == 0 {
			return out
		}
		for _, r := range rows {
			changes, err := s.Apply(r)
			require.NoError(t, err)
			for _, ev := range journal.EventsOf(0, r, changes) {
				out[ev.ID] = ev
			}
		}
	}
}

// TestTheJournalIsTheEventsOutbox: the leader publishes the events of
// what it folds; while it cannot (its publishing fails) and then dies, a
// follower that takes over publishes what was left, so that every event of
// the journal is published, as the fold from scratch makes it; a leader
// started cold afterwards, from the snapshot, publishes none again: the
// position the events reach is recorded with the lease.
func TestTheJournalIsTheEventsOutbox(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	cfg := journal.LeaderConfig{TTL: time.Second, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond, SnapshotEvery: time.Hour}
	start := func(holder string, rec *recorder, snapshotRows int) (*journal.Leader, context.CancelFunc) {
		c := cfg
		c.Holder, c.Publish, c.SnapshotRows = holder, rec.publish, snapshotRows
		l := journal.NewLeader(db, c)
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(lctx)
		}()
		return l, func() { cancel(); <-done }
	}
	leads := func(l *journal.Leader) bool { return l.View(func(*journal.State, journal.Lease) {}) }
	work := func(l *journal.Leader, from, to int) {
		t.Helper()
		var items []journal.Item
		for i := from; i < to; i++ {
			items = append(items, journal.Item{Group: fmt.Sprintf("g%d", i%3), ID: fmt.Sprintf("j%02d", i), Task: "t"})
		}
		body, err := journal.Encode(items)
		require.NoError(t, err)
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body)) // by any coordinator
		claimed, err := l.Claim(ctx, claimParams("e", "i", (to-from)/2))
		require.NoError(t, err)
		var reports []journal.Report
		for _, c := range claimed {
			it := journal.Item{Group: c.Ref.Group, ID: c.Ref.ID, Attempt: c.Attempt, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}
			reports = append(reports, journal.Report{Kind: journal.Started, Item: it}, journal.Report{Kind: journal.Ended, Item: it})
		}
		_, err = l.Report(ctx, reports)
		require.NoError(t, err)
	}
	publishedAll := func(recs ...*recorder) bool {
		want := journalEvents(t, db)
		got := map[string]fairway.Event{}
		for _, r := range recs {
			for id, ev := range r.byID() {
				got[id] = ev
			}
		}
		for id, ev := range want {
			if g, ok := got[id]; !ok || !g.Time.Equal(ev.Time) {
				return false
			}
			g := got[id]
			g.Time = ev.Time
			if g != ev {
				t.Fatalf("event %s published as %+v, the journal makes %+v", id, g, ev)
			}
		}
		return true
	}

	rec1, rec2 := &recorder{}, &recorder{}
	c1, stop1 := start("c1", rec1, 3)
	require.Eventually(t, func() bool { return leads(c1) }, 10*time.Second, 5*time.Millisecond)
	// c2 takes no snapshot: c3 restores c1's, from before the rows whose
	// events c2 published.
	c2, stop2 := start("c2", rec2, 1_000_000)
	work(c1, 0, 12)
	require.Eventually(t, func() bool { return publishedAll(rec1) }, 10*time.Second, 10*time.Millisecond, "the leader publishes what it folds")
	require.NotEmpty(t, rec1.byID())

	rec1.mu.Lock()
	rec1.fail = true
	rec1.mu.Unlock()
	work(c1, 12, 20)
	before := len(rec1.byID())
	stop1() // dies with events unpublished
	expireLease(t, db)
	require.Eventually(t, func() bool { return leads(c2) }, 10*time.Second, 5*time.Millisecond, "c2 takes over")
	require.Eventually(t, func() bool { return publishedAll(rec1, rec2) }, 10*time.Second, 10*time.Millisecond,
		"the follower that took over publishes what the dead leader could not")
	require.Equal(t, before, len(rec1.byID()))
	work(c2, 20, 26)
	require.Eventually(t, func() bool { return publishedAll(rec1, rec2) }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		var unpublished int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal
 WHERE NOT pg_visible_in_snapshot(xid, (SELECT published FROM fairway_journal_lease WHERE partition = 0))`).Scan(&unpublished))
		return unpublished == 0
	}, 10*time.Second, 10*time.Millisecond, "the position the events reach is recorded")
	stop2()

	rec3 := &recorder{}
	expireLease(t, db)
	c3, stop3 := start("c3", rec3, 3)
	defer stop3()
	require.Eventually(t, func() bool { return leads(c3) }, 10*time.Second, 5*time.Millisecond)
	c3.Wake()
	require.Eventually(t, func() bool {
		n := 0
		c3.Follow(func(s *journal.State) { n = s.Jobs.Len() })
		return n > 0
	}, 10*time.Second, 5*time.Millisecond)
	// One more of c3's own rows, and its events, which come after any
	// that a cold start would have published again.
	work(c3, 26, 30)
	require.Eventually(t, func() bool { return publishedAll(rec1, rec2, rec3) }, 10*time.Second, 10*time.Millisecond)
	want := journalEvents(t, db)
	for id := range rec3.byID() {
		_, byEarlier := rec2.byID()[id]
		_, byFirst := rec1.byID()[id]
		require.False(t, byEarlier || byFirst, "a leader started cold published again event %s (%+v)", id, want[id])
	}
}

// TestABacklogOfEventsIsPublishedInChunks: a row of 40,000 submissions
// makes 40,000 events, which the leader holds in their small pending form
// (at most 80 bytes each) and hands on PublishChunk at a time, in the
// journal's order, each once; and Run's loop comes round (it folds)
// after a round of PublishRound chunks, where it used to publish a backlog
// whole first (a million events kept it from renewing the lease for 30 s).
func TestABacklogOfEventsIsPublishedInChunks(t *testing.T) {
	require.LessOrEqual(t, journal.PendingEventSize, uintptr(80), "a pending event costs the leader more than it may")
	ctx := t.Context()
	db := pool(t)
	rec := &recorder{}
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Second, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		SnapshotEvery: time.Hour, Publish: rec.publish})
	rec.folded = l.Folded
	runLeader(t, l)
	const jobs = 40_000
	require.Greater(t, jobs, journal.PublishRound*journal.PublishChunk, "the backlog fits in one round: the test tests nothing of them")
	items := make([]journal.Item, jobs)
	for i := range items {
		items[i] = journal.Item{Group: fmt.Sprintf("g%d", i%7), ID: fmt.Sprintf("j%05d", i), Task: "t"}
	}
	body, err := journal.Encode(items)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	require.Eventually(t, func() bool { return len(rec.byID()) == jobs }, 30*time.Second, 10*time.Millisecond)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.events, jobs, "an event was published twice")
	for _, n := range rec.sizes {
		require.LessOrEqual(t, n, journal.PublishChunk)
	}
	// Nothing but Run's loop folds here: a fold between two calls is the
	// loop come round.
	require.Greater(t, len(rec.foldedBefore), journal.PublishRound)
	require.True(t, rec.foldedBefore[journal.PublishRound], "Run's loop did not come round while a backlog of events was published")
	want := journalEvents(t, db)
	for i, ev := range rec.events {
		require.Equal(t, items[i].ID, ev.JobID, "published out of the journal's order")
		require.Equal(t, fairway.StateWaiting, ev.State)
		w := want[ev.ID]
		require.True(t, w.Time.Equal(ev.Time))
		w.Time = ev.Time
		require.Equal(t, w, ev)
	}
}

// TestEventIDsAreStableAndDoNotComeAgain: a row's events have the same
// ids whenever they are made (a successor publishes again under them), and
// a row of the same id and changes in another database (made anew,
// restored to an earlier point, a replica promoted that missed the last
// commits) makes other ids: its transaction's time differs. Without the
// time in them, JetStream's duplicate window and the subscribers would
// drop the second database's events as repeats.
func TestEventIDsAreStableAndDoNotComeAgain(t *testing.T) {
	changes := []journal.Change{{Job: fairway.JobRef{Group: "g", ID: "a"}, To: fairway.StateWaiting, Task: "t"}}
	first := journal.Row{ID: 7, At: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	again := journal.EventsOf(0, first, changes)
	require.Equal(t, journal.EventsOf(0, first, changes)[0].ID, again[0].ID, "the same row, the same id")
	anew := first
	anew.At = first.At.Add(time.Microsecond)
	require.NotEqual(t, again[0].ID, journal.EventsOf(0, anew, changes)[0].ID, "the same row id at another time")
}

// TestAnEventOfAStateOutsideTheTableKeepsIt: a pending event holds its
// states by their place in a table of the job states; a state outside it
// (none the fold makes today) is published as it was, not as another.
func TestAnEventOfAStateOutsideTheTableKeepsIt(t *testing.T) {
	r := journal.Row{ID: 7, At: time.Unix(1_700_000_000, 0)}
	evs := journal.EventsOf(2, r, []journal.Change{
		{Job: fairway.JobRef{Group: "g", ID: "a"}, From: fairway.StateWaiting, To: fairway.StateSkipped, Task: "t"},
		{Job: fairway.JobRef{Group: "g", ID: "b"}, From: fairway.StateFired, To: fairway.StateRunning, Task: "t", Attempt: 1},
	})
	require.Len(t, evs, 2)
	require.Equal(t, "j2.7.0."+strconv.FormatInt(r.At.UnixMicro(), 36), evs[0].ID)
	require.Equal(t, fairway.StateWaiting, evs[0].PreviousState)
	require.Equal(t, fairway.StateSkipped, evs[0].State)
	require.Equal(t, fairway.StateFired, evs[1].PreviousState)
	require.Equal(t, fairway.StateRunning, evs[1].State)
	require.Equal(t, 1, evs[1].Attempt)
}

// TestASubmittedRowsEventsAreHeldAsOneEntry: the events of a submitted
// row each of whose items made a job are held as one entry until they are
// published (a million submissions cost the leader a few entries), read
// again from the row when published, here from PostgreSQL (the leader
// keeps no row's body), and published as the fold makes them, in order;
// a row with a duplicate and a refused tracker keeps an entry per event.
func TestASubmittedRowsEventsAreHeldAsOneEntry(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	rec := &recorder{fail: true}
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Second, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		SnapshotEvery: time.Hour, RecentBytes: 1, Publish: rec.publish})
	runLeader(t, l)
	const jobs = 5000
	items := make([]journal.Item, jobs)
	for i := range items {
		items[i] = journal.Item{Group: fmt.Sprintf("g%d", i%7), ID: fmt.Sprintf("j%05d", i), Task: "t", Tracker: fmt.Sprintf("k%05d", i), Pending: i >= jobs/2}
	}
	// The first half waiting, the second pending: two states, so two
	// rows of one state each.
	for _, part := range [][]journal.Item{items[:jobs/2], items[jobs/2:]} {
		body, err := journal.Encode(part)
		require.NoError(t, err)
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	}
	odd := []journal.Item{
		{Group: "g0", ID: "j00000", Task: "t"},                // a duplicate: no change
		{Group: "g0", ID: "x1", Task: "t", Tracker: "k00000"}, // refused: its tracker is held
		{Group: "g1", ID: "x2", Task: "t"}, {Group: "g1", ID: "x3", Task: "t"},
	}
	body, err := journal.Encode(odd)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	require.Eventually(t, func() bool {
		var n int
		l.Follow(func(s *journal.State) { n = s.Jobs.Len() })
		return n == jobs+2
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 2+3, l.PendingEntries(), "two runs, and three events of the odd row")

	rec.mu.Lock()
	rec.fail = false
	rec.mu.Unlock()
	l.Wake()
	require.Eventually(t, func() bool { return len(rec.byID()) == jobs+3 }, 30*time.Second, 10*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.events, jobs+3, "an event was published twice")
	want := journalEvents(t, db)
	require.Len(t, want, jobs+3)
	for i, ev := range rec.events {
		if i < jobs {
			require.Equal(t, items[i].ID, ev.JobID, "published out of the journal's order")
		}
		w := want[ev.ID]
		require.True(t, w.Time.Equal(ev.Time))
		w.Time = ev.Time
		require.Equal(t, w, ev)
	}
	require.Equal(t, fairway.StatePending, rec.events[jobs-1].State)
	require.Equal(t, fairway.StateRejected, rec.events[jobs].State)
}

// runLeader runs l until the test ends.
func runLeader(t *testing.T, l *journal.Leader) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return stop
}

// TestThePublishedPositionIsRecordedNowAndThen: the leader records where
// its published events reach once per PublishedNote, not after every
// round of events (a commit each); the events it published since the
// last record are published again by its successor (at least once), none
// lost.
func TestThePublishedPositionIsRecordedNowAndThen(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	cfg := journal.LeaderConfig{TTL: time.Second, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		SnapshotEvery: time.Hour, SnapshotRows: 1_000_000, PublishedNote: time.Hour}
	unrecorded := func() (n int) {
		t.Helper()
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal j, fairway_journal_lease l
 WHERE l.partition = 0 AND (l.published IS NULL OR NOT pg_visible_in_snapshot(j.xid, l.published))`).Scan(&n))
		return n
	}
	submit := func(l *journal.Leader, i int) {
		t.Helper()
		body, err := journal.Encode([]journal.Item{{Group: "g", ID: fmt.Sprintf("j%02d", i), Task: "t"}})
		require.NoError(t, err)
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
		l.Wake()
	}

	rec1 := &recorder{}
	c1 := cfg
	c1.Holder, c1.Publish = "c1", rec1.publish
	l1 := journal.NewLeader(db, c1)
	stop1 := runLeader(t, l1)
	submit(l1, 0)
	require.Eventually(t, func() bool { return len(rec1.byID()) == 1 && unrecorded() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the first round's position is recorded")
	for i := 1; i <= 5; i++ {
		submit(l1, i)
		require.Eventually(t, func() bool { return len(rec1.byID()) == i+1 }, 10*time.Second, 5*time.Millisecond, "round %d is published", i)
	}
	require.Equal(t, 5, unrecorded(), "five rounds published, their position not recorded: no commit each")
	stop1()

	// The successor publishes again what the position does not cover.
	expireLease(t, db)
	rec2 := &recorder{}
	c2 := cfg
	c2.Holder, c2.Publish, c2.PublishedNote = "c2", rec2.publish, time.Millisecond
	runLeader(t, journal.NewLeader(db, c2))
	require.Eventually(t, func() bool { return len(rec2.byID()) == 5 && unrecorded() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the successor publishes again the five rounds whose position was not recorded, and records it")
	for id := range rec2.byID() {
		require.Contains(t, rec1.byID(), id, "published again, not anew")
	}
}
