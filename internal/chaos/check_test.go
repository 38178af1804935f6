package chaos

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// TestAccountingCatchesBrokenGuarantees feeds the accounting a history in
// which each guarantee is broken once, so the suite is known to be able to
// fail.
func TestAccountingCatchesBrokenGuarantees(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := kind{task: "echo", final: fairway.StateSuccess}
	submitted := map[string]kind{"good": ok, "lost": ok, "twice": ok, "silent": ok, "overlap": ok, "unclaimed": ok}
	jobs := map[string]jobRow{
		"good":      {state: fairway.StateSuccess, attempt: 1},
		"twice":     {state: fairway.StateSuccess, attempt: 1},
		"silent":    {state: fairway.StateSuccess, attempt: 1},
		"overlap":   {state: fairway.StateSuccess, attempt: 2},
		"unclaimed": {state: fairway.StateFailed, attempt: 2}, // one claim has no event; also unexpected
		// "lost" is not in PostgreSQL at all
	}
	ev := func(id, job string, state fairway.State, attempt, ms int) events.Event {
		return events.Event{ID: id, JobID: job, State: state, Attempt: attempt, Time: at(ms)}
	}
	stuck := func(id, job string, attempt, ms int) events.Event {
		e := ev(id, job, fairway.StateStuck, attempt, ms)
		e.Error = "executor lost: it restarted"
		return e
	}
	evs := []events.Event{
		ev("1", "good", fairway.StateScheduled, 1, 0), ev("2", "good", fairway.StateSuccess, 1, 10),
		ev("2", "good", fairway.StateSuccess, 1, 10), // a duplicate delivery is fine
		ev("3", "twice", fairway.StateScheduled, 1, 0), ev("4", "twice", fairway.StateSuccess, 1, 10), ev("5", "twice", fairway.StateFailed, 1, 20),
		ev("6", "silent", fairway.StateScheduled, 1, 0),
		ev("7", "overlap", fairway.StateScheduled, 1, 0), stuck("7s", "overlap", 1, 4), ev("8", "overlap", fairway.StateScheduled, 2, 5), ev("9", "overlap", fairway.StateSuccess, 2, 50),
		ev("10", "unclaimed", fairway.StateScheduled, 2, 0), ev("11", "unclaimed", fairway.StateFailed, 2, 30),
	}
	trace := newTrace()
	line := func(msg, job string, attempt, ms int) []byte {
		return fmt.Appendf(nil, `{"time":%q,"msg":%q,"job_id":%q,"attempt":%d,"task":"echo","outcome":"success"}`, at(ms).Format(time.RFC3339Nano), msg, job, attempt)
	}
	trace.add("a", line("job started", "overlap", 1, 0))
	trace.add("b", line("job started", "overlap", 2, 5))
	trace.add("b", line("job finished", "overlap", 2, 40))
	trace.add("a", line("job finished", "overlap", 1, 45)) // ran on after b started
	trace.add("a", line("job started", "good", 1, 1))
	trace.add("a", line("job finished", "good", 1, 9))

	var r Result
	account(&r, submitted, jobs, 1, evs, trace, []time.Time{at(1)})
	want := Result{Submitted: 6, Final: 5, Lost: 1, Concurrent: 1, NotOneFinal: 1, WithoutEvent: 1 + 1 + 1, Unexpected: 1, Reruns: 1, Faults: 1,
		Releases: map[string]int{"executor lost: it restarted": 1}}
	got := r
	got.Recovery, got.Slowest, got.SlowestJob, got.RerunJobs = 0, 0, "", nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("accounting:\n got %+v\nwant %+v", got, want)
	}
	if r.OK() {
		t.Error("OK() with every guarantee broken")
	}
	// In flight at the fault (t0+1ms): good, twice, silent, overlap,
	// unclaimed; the last of them to end is overlap at +50 ms.
	if r.Recovery != 49*time.Millisecond {
		t.Errorf("recovery %s, want 49ms", r.Recovery)
	}
}

// TestTraceKilledRunsEndAtTheKill: a run cut short by SIGKILL ends when
// the process died, so a later run elsewhere is not an overlap.
func TestTraceKilledRunsEndAtTheKill(t *testing.T) {
	tr := newTrace()
	t0 := time.Now()
	tr.add("a", fmt.Appendf(nil, `{"time":%q,"msg":"job started","job_id":"j","attempt":1}`, t0.Format(time.RFC3339Nano)))
	if n := tr.running("a", ""); n != 1 {
		t.Fatalf("running %d, want 1", n)
	}
	tr.killed("a", t0.Add(time.Second))
	tr.add("b", fmt.Appendf(nil, `{"time":%q,"msg":"job started","job_id":"j","attempt":2}`, t0.Add(4*time.Second).Format(time.RFC3339Nano)))
	if jobs, _ := tr.overlapping(t0.Add(5 * time.Second)); len(jobs) != 0 {
		t.Errorf("overlapping %v after a kill", jobs)
	}
	if n := tr.running("a", ""); n != 0 {
		t.Errorf("a still runs %d after its kill", n)
	}
}
