package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestResultsApplyABatchOfReports runs the results service alone on a
// batch read from the results stream: the journal's leader applies an
// executor's start and end of the job it holds (the start folded into the
// end) and publishes the end's event, a message that is not a report goes
// to the dead-letter stream, and every message is acknowledged.
func TestResultsApplyABatchOfReports(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newStreamWorld(t)
	st, js, subjects := w.st, w.js, w.subjects
	rs, f, e := w.results(t)
	require.Equal(t, resultBatch, rs.cfg.Batch)

	err := st.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}},
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	storeJobs(t, e, fairway.Submission{Group: "g", ID: "j1"})
	claimed, err := e.claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", ClaimID: fairway.NewID(), Limit: 1, Tasks: []string{"t"}, Lease: time.Minute,
		Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	started := time.Now().UTC().Truncate(time.Microsecond) // after the claim: an earlier start is the claim's time
	reports, err := json.Marshal([]events.Report{
		{Type: events.ReportStarted, Group: "g", JobID: "j1", Attempt: claimed[0].Attempt, Instance: "i1", Time: started},
		{Type: events.ReportDone, Group: "g", JobID: "j1", Attempt: claimed[0].Attempt, Instance: "i1", Time: time.Now(),
			Outcome: fairway.OutcomeSuccess, Result: json.RawMessage(`{"ok":true}`)},
	})
	require.NoError(t, err)
	_, err = js.Publish(ctx, subjects.Results("w"), reports)
	require.NoError(t, err)
	_, err = js.Publish(ctx, subjects.Results("w"), []byte("not a report"))
	require.NoError(t, err)

	cons := testConsumer(t, js, subjects.ResultStream())
	rs.apply(ctx, fetch(t, cons, 2))

	job, err := st.Get(ctx, "g", "j1")
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, job.State)
	require.JSONEq(t, `{"ok":true}`, string(job.Result))
	require.NotNil(t, job.Started)
	require.True(t, started.Equal(*job.Started), "started %s, not the end's time %s", started, *job.Started)
	require.Eventually(t, func() bool { return f.state("j1") == fairway.StateSuccess }, serviceWait, 5*time.Millisecond, "the end's event is published")
	var states []fairway.State
	for _, ev := range f.events {
		if ev.JobID == "j1" {
			states = append(states, ev.State)
		}
	}
	require.Equal(t, []fairway.State{fairway.StateWaiting, fairway.StateScheduled, fairway.StateRunning, fairway.StateSuccess}, states,
		"every change once: the start's with the end's row")

	deadMsgs := readStream(t, js, subjects.DeadStream(), 1)
	require.Equal(t, subjects.Dead(events.DeadReport), deadMsgs[0].Subject())
	require.Contains(t, deadMsgs[0].Headers().Get(events.HeaderDeadReason), "undecodable executor report")
	requireAllAcked(t, cons, "every message is acknowledged")
}

// TestResultsStoppedMidBatchKeepLogLines applies a batch of log lines
// with the context of a coordinator that is stopping: the statement is
// cancelled, which is no refusal by PostgreSQL, so nothing is logged as
// refused and the message stays in JetStream; applied again, its lines are
// stored. Before, the lines were dropped and the message acknowledged
// ("dropping job log lines PostgreSQL refused … context canceled").
func TestResultsStoppedMidBatchKeepLogLines(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newStreamWorld(t)
	var logged bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logged.Write(p)
	}), nil))
	st, nc, js, subjects := w.st, w.nc, w.js, w.subjects
	metrics := newMetrics(prometheus.NewRegistry(), st, log)
	dead := &deadLetters{after: DeadLetterAfterDefault, subjects: subjects, nc: nc, js: js, log: log, metrics: metrics}
	rs := newResults(resultsConfig{}, serviceBase{store: st, log: log, metrics: metrics, nc: nc, js: js, subjects: subjects}, dead)
	e := startJournal(t, st, newFollowUps(), nil)
	rs.parts = partitions{e}

	err := st.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}},
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	storeJobs(t, e, fairway.Submission{Group: "g", ID: "j1"})
	claimed, err := e.claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", ClaimID: fairway.NewID(), Limit: 1, Tasks: []string{"t"}, Lease: time.Minute,
		Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	reports, err := json.Marshal([]events.Report{{Type: events.ReportLog, Group: "g", JobID: "j1", Attempt: claimed[0].Attempt, Instance: "i1",
		Time: time.Now(), Logs: []fairway.LogLine{{Group: "g", JobID: "j1", Attempt: claimed[0].Attempt, Time: time.Now(), Level: "info", Message: "last words"}}}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, subjects.Results("w"), reports)
	require.NoError(t, err)
	cons := testConsumer(t, js, subjects.ResultStream())
	lines := func() []string {
		var msgs []string
		_, err := st.LogLines(ctx, store.LogsParams{Group: "g", ID: "j1", Live: true}, func(l fairway.LogLine) bool {
			msgs = append(msgs, l.Message)
			return true
		})
		require.NoError(t, err)
		return msgs
	}

	stopping, stop := context.WithCancel(ctx)
	stop()
	rs.apply(stopping, fetch(t, cons, 1))
	require.Empty(t, lines())
	logMu.Lock()
	require.NotContains(t, logged.String(), "refused", "a cancelled statement is no refusal")
	logMu.Unlock()

	rs.apply(ctx, fetch(t, cons, 1)) // the same message, handed out again
	require.Equal(t, []string{"last words"}, lines())
	requireAllAcked(t, cons, "the message is acknowledged once applied")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestResultsDeadLetterAnOversizedMessageCut: a report message above
// events.ReportMaxBytes, left in a results stream of an earlier version
// (which took messages up to max_payload), is never decoded: it goes to
// the dead letters with its first 64 KiB and its size, and is
// acknowledged. The streams of this version refuse it at once.
func TestResultsDeadLetterAnOversizedMessageCut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newStreamWorld(t)
	js, subjects := w.js, w.subjects
	rs, _, _ := w.results(t)

	huge := bytes.Repeat([]byte(`{"type":"done","job_id":"x"},`), 3<<20/29)
	huge = append(append([]byte("["), huge[:len(huge)-1]...), ']')
	_, err := js.Publish(ctx, subjects.Results("w"), huge)
	require.Error(t, err, "the results stream of this version refuses a message above events.ReportMaxBytes")

	stream, err := js.Stream(ctx, subjects.ResultStream())
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	cfg.MaxMsgSize = 8 << 20 // as an earlier version made it
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	_, err = js.Publish(ctx, subjects.Results("w"), huge)
	require.NoError(t, err)

	cons := testConsumer(t, js, subjects.ResultStream())
	rs.apply(ctx, fetch(t, cons, 1))

	deadMsgs := readStream(t, js, subjects.DeadStream(), 1)
	require.Equal(t, subjects.Dead(events.DeadReport), deadMsgs[0].Subject())
	require.Contains(t, deadMsgs[0].Headers().Get(events.HeaderDeadReason), "above the")
	require.Equal(t, strconv.Itoa(len(huge)), deadMsgs[0].Headers().Get(events.HeaderDeadSize))
	require.Len(t, deadMsgs[0].Data(), oversizedKept, "the dead letter keeps the first bytes only")
	requireAllAcked(t, cons, "the message is acknowledged")
}

// results is the results service alone on w, with a journal engine that
// leads the partition, its follow-ups recorded.
func (w streamWorld) results(t *testing.T) (*results, *followUps, *journalEngine) {
	metrics := newMetrics(prometheus.NewRegistry(), w.st, w.log)
	f := newFollowUps()
	rs := newResults(resultsConfig{}, w.base(metrics), w.deadLetters(metrics))
	rs.parts = partitions{startJournal(t, w.st, f, nil)}
	return rs, f, rs.parts[0]
}
