package chaos

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
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
	got.Recovery, got.Slowest, got.SlowestJob, got.RerunJobs, got.LostJobs = 0, 0, "", nil, nil
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

// TestReadsOfAJobAreCheckedForLinearizability: the model accepts reads
// that see a job move forward in some order agreeing with real time
// (overlapping reads in either order), and refuses a read older than one
// answered before it was asked, a job that vanishes once seen, and a
// final state that changes.
func TestReadsOfAJobAreCheckedForLinearizability(t *testing.T) {
	at := func(s fairway.State, attempt int) observation { return observation{state: s, attempt: attempt} }
	absent := observation{absent: true}
	read := func(call, ret int64, o observation) porcupine.Operation {
		return porcupine.Operation{Input: jobRead{id: "j"}, Call: call, Output: o, Return: ret}
	}
	for name, tc := range map[string]struct {
		ops  []porcupine.Operation
		want bool
	}{
		"forward, with a retry": {[]porcupine.Operation{read(0, 1, absent), read(2, 3, at(fairway.StateWaiting, 0)), read(4, 5, at(fairway.StateRunning, 1)),
			read(6, 7, at(fairway.StateWaiting, 1)), read(8, 9, at(fairway.StateScheduled, 2)), read(10, 11, at(fairway.StateSuccess, 2)), read(12, 13, at(fairway.StateSuccess, 2))}, true},
		"overlapping reads, answered out of order":    {[]porcupine.Operation{read(0, 10, at(fairway.StateRunning, 1)), read(1, 2, at(fairway.StateScheduled, 1))}, true},
		"a stale read after a newer one was answered": {[]porcupine.Operation{read(0, 1, at(fairway.StateRunning, 1)), read(2, 3, at(fairway.StateScheduled, 1))}, false},
		"an older attempt after a newer one":          {[]porcupine.Operation{read(0, 1, at(fairway.StateScheduled, 2)), read(2, 3, at(fairway.StateWaiting, 1))}, false},
		"absent once seen":                            {[]porcupine.Operation{read(0, 1, at(fairway.StateWaiting, 0)), read(2, 3, absent)}, false},
		"a final state that changes":                  {[]porcupine.Operation{read(0, 1, at(fairway.StateFailed, 1)), read(2, 3, at(fairway.StateSuccess, 1))}, false},
	} {
		require.Equal(t, tc.want, porcupine.CheckOperations(jobModel(nil), tc.ops), name)
	}

	// A release without counting (a second SIGTERM) puts the job back
	// under the attempt before: forward for that attempt, once the
	// executor said it released it, and for no other.
	givenBack := []porcupine.Operation{read(0, 1, at(fairway.StateRunning, 2)), read(2, 3, at(fairway.StateWaiting, 1)),
		read(4, 5, at(fairway.StateRunning, 2)), read(6, 7, at(fairway.StateSuccess, 2))}
	released := func(id string, attempt int) bool { return id == "j" && attempt == 2 }
	require.True(t, porcupine.CheckOperations(jobModel(released), givenBack), "attempt 2 released")
	require.False(t, porcupine.CheckOperations(jobModel(nil), givenBack), "no release said")
	require.False(t, porcupine.CheckOperations(jobModel(func(string, int) bool { return false }), givenBack), "another attempt released")
	require.False(t, porcupine.CheckOperations(jobModel(released), []porcupine.Operation{read(0, 1, at(fairway.StateRunning, 2)), read(2, 3, at(fairway.StateWaiting, 0))}),
		"released, it waits under the attempt before, not an older one")
}

// TestTheTraceSaysWhichAttemptsWereReleased: an attempt whose run ended
// "released" is one the model lets go back a number.
func TestTheTraceSaysWhichAttemptsWereReleased(t *testing.T) {
	tr := newTrace()
	at := time.Now().Format(time.RFC3339Nano)
	tr.add("a", fmt.Appendf(nil, `{"time":%q,"msg":"job started","job_id":"j","attempt":2}`, at))
	tr.add("a", fmt.Appendf(nil, `{"time":%q,"msg":"job finished","job_id":"j","attempt":2,"outcome":"released"}`, at))
	tr.add("a", fmt.Appendf(nil, `{"time":%q,"msg":"job started","job_id":"k","attempt":1}`, at))
	tr.add("a", fmt.Appendf(nil, `{"time":%q,"msg":"job finished","job_id":"k","attempt":1,"outcome":"success"}`, at))
	require.True(t, tr.released("j", 2))
	require.False(t, tr.released("j", 1))
	require.False(t, tr.released("k", 1))
}
