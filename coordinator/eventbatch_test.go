package coordinator

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
)

func testSubject(e store.Event) string { return e.Group + "." + e.Task + "." + string(e.State) }

// published decodes batches as a subscriber of every subject reads them:
// the messages in order, each message's events in order.
func published(t *testing.T, batches []*eventBatch) []store.Event {
	t.Helper()
	var out []store.Event
	for _, b := range batches {
		evs, err := events.DecodeEvents(b.data)
		if err != nil {
			t.Fatalf("batch on %s: %v\n%s", b.subject, err, b.data)
		}
		for _, e := range evs {
			if testSubject(e) != b.subject {
				t.Fatalf("event %s (%s) in a batch on %s", e.ID, testSubject(e), b.subject)
			}
		}
		out = append(out, evs...)
	}
	return out
}

// checkBatches checks that every event is published once, and each job's
// events in the order of their ids.
func checkBatches(t *testing.T, evs []store.Event, batches []*eventBatch) {
	t.Helper()
	got := published(t, batches)
	if len(got) != len(evs) {
		t.Fatalf("published %d events, want %d", len(got), len(evs))
	}
	seen := map[string]bool{}
	lastOfJob := map[string]int{}
	for _, e := range got {
		if seen[e.ID] {
			t.Fatalf("event %s published twice", e.ID)
		}
		seen[e.ID] = true
		id, _ := strconv.Atoi(e.ID)
		if prev, ok := lastOfJob[e.Group+"/"+e.JobID]; ok && prev > id {
			t.Fatalf("job %s/%s: event %d published after event %d", e.Group, e.JobID, id, prev)
		}
		lastOfJob[e.Group+"/"+e.JobID] = id
	}
}

func ev(id int, group, job string, state fairway.State) store.Event {
	return store.Event{ID: strconv.Itoa(id), Group: group, JobID: job, Task: "t", State: state}
}

func TestBatchEventsOneMessagePerSubjectAndStatement(t *testing.T) {
	var evs []store.Event
	id := 0
	// A claim of 100 jobs of two groups, then their starts and ends
	// reported together (running and success alternate per job).
	for j := range 100 {
		id++
		evs = append(evs, ev(id, []string{"a", "b"}[j%2], fmt.Sprint(j), fairway.StateScheduled))
	}
	for j := range 100 {
		id++
		evs = append(evs, ev(id, []string{"a", "b"}[j%2], fmt.Sprint(j), fairway.StateRunning))
		id++
		evs = append(evs, ev(id, []string{"a", "b"}[j%2], fmt.Sprint(j), fairway.StateSuccess))
	}
	batches, err := batchEvents(evs, testSubject, appendEvent)
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, evs, batches)
	// Per group: scheduled, running, success.
	if len(batches) != 6 {
		var subjects []string
		for _, b := range batches {
			subjects = append(subjects, fmt.Sprintf("%s(%d)", b.subject, len(b.events)))
		}
		t.Fatalf("%d messages, want 6: %s", len(batches), strings.Join(subjects, " "))
	}
}

func TestBatchEventsKeepsEachJobInOrder(t *testing.T) {
	states := []fairway.State{fairway.StateWaiting, fairway.StateScheduled, fairway.StateRunning, fairway.StateStuck, fairway.StateSuccess}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		n := 1 + r.IntN(300)
		evs := make([]store.Event, n)
		for i := range evs {
			evs[i] = ev(i+1, []string{"a", "b", "c"}[r.IntN(3)], fmt.Sprint(r.IntN(20)), states[r.IntN(len(states))])
		}
		batches, err := batchEvents(evs, testSubject, appendEvent)
		if err != nil {
			t.Fatal(err)
		}
		checkBatches(t, evs, batches)
	}
}

func TestBatchEventsSplitsLargeBatches(t *testing.T) {
	long := strings.Repeat("x", fairway.MaxErrorTextSize)
	var evs []store.Event
	for i := range 200 {
		e := ev(i+1, "a", fmt.Sprint(i), fairway.StateFailed)
		e.Error = long
		evs = append(evs, e)
	}
	batches, err := batchEvents(evs, testSubject, appendEvent)
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, evs, batches)
	if len(batches) < 2 {
		t.Fatalf("%d messages for %d KiB of events, want several of at most %d KiB", len(batches), 200*fairway.MaxErrorTextSize>>10, eventBatchBytes>>10)
	}
	for _, b := range batches {
		if len(b.data) > eventBatchBytes {
			t.Fatalf("a message of %d bytes, over %d", len(b.data), eventBatchBytes)
		}
		if len(b.data) != b.size || cap(b.data) != b.size {
			t.Fatalf("a message of %d bytes (room for %d) made for %d", len(b.data), cap(b.data), b.size)
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(b.data, &raw); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBatchEventsIDsAreDeterministic(t *testing.T) {
	evs := []store.Event{ev(1, "a", "1", fairway.StateWaiting), ev(2, "a", "2", fairway.StateWaiting), ev(3, "a", "1", fairway.StateScheduled)}
	ids := func(evs []store.Event) []string {
		batches, err := batchEvents(evs, testSubject, appendEvent)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range batches {
			out = append(out, b.id(evs))
		}
		return out
	}
	first, again := ids(evs), ids(evs)
	if strings.Join(first, " ") != strings.Join(again, " ") {
		t.Fatalf("ids differ for the same events: %v and %v", first, again)
	}
	// A batch of other events (a read that found one more) is another message.
	more := ids(append(evs[:2:2], ev(4, "a", "3", fairway.StateWaiting)))
	if more[0] == first[0] {
		t.Fatalf("batches of different events share the id %s", more[0])
	}
}

// TestEncodeEventAsJSONMarshal: the hand-written encoder writes what
// json.Marshal writes, for any text in any field.
func TestEncodeEventAsJSONMarshal(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "ctl \x00\x01\x1f\n\r\t\b\f", "<html>&amp;", "bad \xff\xfe utf8 \xe2\x82",
		"line\u2028sep\u2029", "ünïcödé ✓ 😀", strings.Repeat("x", 300)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		pick := func() string {
			if i < len(texts) {
				return texts[i]
			}
			if r.IntN(2) == 0 {
				return texts[r.IntN(len(texts))]
			}
			b := make([]byte, r.IntN(40))
			for k := range b {
				b[k] = byte(r.IntN(256)) //nolint:gosec // G115: IntN(256) is 0-255
			}
			return string(b)
		}
		e := store.Event{ID: pick(), JobID: pick(), Task: pick(), Group: pick(), State: fairway.State(pick()), PreviousState: fairway.State(pick()),
			Attempt: r.IntN(100) - 1, Error: pick(), Code: fairway.Code(pick()), Field: pick(), Executor: pick(), Periodic: pick(),
			Time: time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()}
		if r.IntN(3) == 0 {
			e.PreviousState, e.Error, e.Code = "", "", ""
		}
		got, err := encodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(capEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
