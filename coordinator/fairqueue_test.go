package coordinator

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestFairQueueTakesRoundRobinAcrossKeys(t *testing.T) {
	q := newFairQueue(func(s string) int { return len(s) })
	push := func(items ...string) {
		for _, it := range items {
			key, _, _ := strings.Cut(it, "-")
			q.push(key, it)
		}
	}
	// A's burst is in the stream before B's and C's first submissions.
	push("a-1", "a-2", "a-3", "a-4", "a-5", "b-1", "a-6", "b-2", "c-1")
	if q.len != 9 || q.bytes != 27 {
		t.Fatalf("len %d bytes %d, want 9 and 27", q.len, q.bytes)
	}
	steps := []struct {
		max  int
		want []string
	}{
		{4, []string{"a-1", "b-1", "c-1", "a-2"}},
		// A second batch goes on with the rotation where the first left it.
		{3, []string{"b-2", "a-3", "a-4"}},
		{10, []string{"a-5", "a-6"}},
		{10, []string{}},
	}
	for i, s := range steps {
		if got := q.take(s.max); !slices.Equal(got, s.want) {
			t.Fatalf("take %d: %v, want %v", i+1, got, s.want)
		}
	}
	if q.len != 0 || q.bytes != 0 || len(q.ring) != 0 {
		t.Fatalf("empty queue: len %d bytes %d ring %v", q.len, q.bytes, q.ring)
	}
}

func TestFairQueueNewKeyWaitsForTheCurrentRotation(t *testing.T) {
	q := newFairQueue(func(string) int { return 1 })
	for _, it := range []string{"a-1", "a-2", "b-1", "b-2", "c-1", "c-2"} {
		q.push(it[:1], it)
	}
	if got := q.take(2); !slices.Equal(got, []string{"a-1", "b-1"}) {
		t.Fatalf("first take: %v", got)
	}
	// d arrives while c's turn is next: c, a and b go first, then d.
	q.push("d", "d-1")
	want := []string{"c-1", "a-2", "b-2", "d-1", "c-2"}
	if got := q.take(10); !slices.Equal(got, want) {
		t.Fatalf("take: %v, want %v", got, want)
	}
}

func TestFairQueueDrain(t *testing.T) {
	q := newFairQueue(func(string) int { return 1 })
	for _, it := range []string{"a-1", "b-1", "a-2"} {
		q.push(it[:1], it)
	}
	got := q.drain()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a-1", "a-2", "b-1"}) || q.len != 0 || len(q.take(5)) != 0 {
		t.Fatalf("drain %v, len after %d", got, q.len)
	}
}

func TestFairQueueTakesByWeight(t *testing.T) {
	q := newFairQueue(func(string) int { return 1 })
	q.weight = func(s string) int { return len(s) } // "aaa" weighs 3
	for _, it := range []string{"aaa", "a", "bbbbb", "b"} {
		q.push(it[:1], it)
	}
	if got := q.take(4); !slices.Equal(got, []string{"aaa", "bbbbb"}) {
		t.Fatalf("take(4) = %v: want a's 3 then b's 5 (the one that reaches the limit is taken)", got)
	}
	if got := q.take(1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("take(1) = %v", got)
	}
}

func TestCountSubmissions(t *testing.T) {
	for body, want := range map[string]int{
		`{"id":"x"}`: 1, `  [ ]`: 1, `[{"id":"x"}]`: 1, `[{"id":"x"},{"id":"y"}]`: 2,
		`[{"id":"a,b","args":{"l":[1,2,3],"s":"x\",y"}},{}, {} ]`: 3, `[`: 1, `[{},`: 2,
	} {
		if got := countSubmissions([]byte(body)); got != want {
			t.Errorf("countSubmissions(%s) = %d, want %d", body, got, want)
		}
	}
}

func TestFairQueueEndsABatchWhereAKeyRunsOut(t *testing.T) {
	q := newFairQueue(func(string) int { return 1 })
	q.weight = func(s string) int { return len(s) - 2 } // "a-xxxx" weighs 4
	// A's burst of messages of 10, then B's one message of 2.
	for range 10 {
		q.push("a", "a-xxxxxxxxxx")
	}
	q.push("b", "b-xx")
	// The first rotation takes a message of A's and B's only one: B ran
	// out, 12 taken of 40 and A's 90 left would fill the rest. B's
	// submissions go in a batch of 12, not of 42.
	if got := q.take(40); !slices.Equal(got, []string{"a-xxxxxxxxxx", "b-xx"}) {
		t.Fatalf("first take: %v, want A's first message and B's", got)
	}
	// A alone: whole batches (the one that reaches the limit is taken).
	if got := q.take(40); len(got) != 4 {
		t.Fatalf("second take: %d messages, want 4 (A's alone)", len(got))
	}
	// Never two early ends in a row: C runs out in the first rotation of
	// each of the next two takes; only the first ends early.
	q.push("c", "c-xx")
	if got := q.take(40); len(got) != 2 {
		t.Fatalf("third take: %v, want A's next message and C's (an early end)", got)
	}
	q.push("c", "c-xx")
	if got := q.take(40); len(got) != 5 {
		t.Fatalf("fourth take: %v, want a full batch: A's and C's, then A's up to the limit", got)
	}
	// More than half the limit taken before B ran out: no early end.
	q = newFairQueue(func(string) int { return 1 })
	for range 10 {
		q.push("a", "a-1")
	}
	q.push("b", "b-1")
	q.push("b", "b-2")
	q.push("b", "b-3")
	if got := q.take(8); len(got) != 8 {
		t.Fatalf("take(8): %v, want 8 items: B ran out after 6 of 8", got)
	}
	// What is left would not fill the batch: no early end either.
	q = newFairQueue(func(string) int { return 1 })
	for _, it := range []string{"a-1", "a-2", "a-3", "b-1"} {
		q.push(it[:1], it)
	}
	if got := q.take(100); len(got) != 4 {
		t.Fatalf("take(100): %v, want all 4", got)
	}
}

// TestFairQueueGivesEachKeyAQuantumATurn: a key of light items (single
// submissions) gets as much weight a turn as a key of heavy ones
// (messages of a hundred), not one item: fairness by submissions, not by
// messages.
func TestFairQueueGivesEachKeyAQuantumATurn(t *testing.T) {
	q := newFairQueue(func(string) int { return 1 })
	q.weight = func(s string) int {
		if strings.HasPrefix(s, "heavy") {
			return 100
		}
		return 1
	}
	q.quantum = 100
	for i := range 3 {
		q.push("h", "heavy-"+strconv.Itoa(i))
	}
	for i := range 150 {
		q.push("l", "light-"+strconv.Itoa(i))
	}
	got := q.take(300)
	require.Len(t, got, 102, "heavy-0, a hundred light ones, heavy-1")
	require.Equal(t, "heavy-0", got[0])
	require.Equal(t, "light-0", got[1])
	require.Equal(t, "light-99", got[100])
	require.Equal(t, "heavy-1", got[101])
	got = q.take(300)
	require.Equal(t, []string{"light-100", "light-149", "heavy-2"}, []string{got[0], got[49], got[50]},
		"the rest of the light key's turn, then the heavy key's")
}

// TestFairQueuePassesOverDeferredKeys: a key that allow defers (a group
// over its submission rate) keeps its items, in order, while the others
// are taken; when every key is deferred, nothing is taken and the
// shortest wait is returned.
func TestFairQueuePassesOverDeferredKeys(t *testing.T) {
	q := newFairQueue(func(string) int { return 1 })
	for _, it := range []string{"a-1", "b-1", "a-2", "b-2", "c-1"} {
		q.push(it[:1], it)
	}
	deferA := func(key string, _, _ int) (bool, time.Duration) {
		if key == "a" {
			return false, 30 * time.Millisecond
		}
		return true, 0
	}
	got, retry := q.takeAllowed(10, deferA)
	require.Equal(t, []string{"b-1", "c-1", "b-2"}, got)
	require.Zero(t, retry, "something was taken")
	require.Equal(t, 2, q.len)

	waits := map[string]time.Duration{"a": 30 * time.Millisecond}
	none := func(key string, _, _ int) (bool, time.Duration) { return false, waits[key] }
	q.push("d", "d-1")
	waits["d"] = 10 * time.Millisecond
	got, retry = q.takeAllowed(10, none)
	require.Empty(t, got)
	require.Equal(t, 10*time.Millisecond, retry, "the shortest wait of the deferred keys")

	got, _ = q.takeAllowed(10, nil)
	require.ElementsMatch(t, []string{"a-1", "a-2", "d-1"}, got)
	require.Less(t, slices.Index(got, "a-1"), slices.Index(got, "a-2"), "a's items in their order")
}

// TestFairInboxTakesAgainAfterADeferral: when every queued group is
// deferred, take waits for the rate, not for a new message: a deferral
// that names no wait at all (a bucket a hair short of a token) must not
// leave it waiting for ever (the isolation suite's burst stalled so).
func TestFairInboxTakesAgainAfterADeferral(t *testing.T) {
	inbox := newFairInbox(10, 1<<20, 1<<20, func(jetstream.Msg) int { return 1 })
	deferred := 3
	inbox.allow = func(string, int, int) (bool, time.Duration) {
		if deferred > 0 {
			deferred--
			return false, 0
		}
		return true, 0
	}
	inbox.add("a", pulledMsg{m: &nats.Msg{Subject: "fairway.submit.a.t", Data: []byte(`{}`)}})
	got := make(chan int, 1)
	go func() {
		batch, _ := inbox.take(t.Context(), 10)
		got <- len(batch)
	}()
	select {
	case n := <-got:
		require.Equal(t, 1, n)
	case <-time.After(10 * time.Second):
		t.Fatal("take waited for ever after a deferral without a wait")
	}
}

// TestFairInboxOlderKeepsToItsWindow: the messages keepAlive keeps alive
// are those queued before its time and not before its cap
// (keepAliveFor): one held past the cap is let go to another coordinator.
func TestFairInboxOlderKeepsToItsWindow(t *testing.T) {
	inbox := newFairInbox(10, 1<<20, 1<<20, func(jetstream.Msg) int { return 1 })
	before := time.Now()
	inbox.add("a", pulledMsg{m: &nats.Msg{Subject: "fairway.submit.a.t", Data: []byte(`{"id":"1"}`)}})
	inbox.add("b", pulledMsg{m: &nats.Msg{Subject: "fairway.submit.b.t", Data: []byte(`{"id":"2"}`)}})
	after := time.Now().Add(time.Millisecond)
	require.Len(t, inbox.older(after, before.Add(-time.Minute)), 2, "queued within the window")
	require.Empty(t, inbox.older(before, before.Add(-time.Minute)), "queued after the window's end")
	require.Empty(t, inbox.older(after.Add(time.Hour), after), "queued before the window's start: past the cap")
}
