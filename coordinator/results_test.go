package coordinator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestResultsApplyABatchOfReports runs the results service alone on a
// batch read from the results stream: an executor's start and end of the
// job it holds are applied (the start folded into the end) and followed
// up, a message that is not a report goes to the dead-letter stream, and
// every message is acknowledged.
func TestResultsApplyABatchOfReports(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newStreamWorld(t)
	st, nc, js, subjects, log := w.st, w.nc, w.js, w.subjects, w.log
	metrics := newMetrics(prometheus.NewRegistry(), st, log)
	dead := w.deadLetters(metrics)
	f := newFollowUps()
	rs := newResults(resultsConfig{RetryDelay: time.Hour}, st, subjects, nc, log, metrics, dead, f.afterChange, f.kickOutbox)
	require.Equal(t, resultBatch, rs.cfg.Batch)
	require.Equal(t, 16*resultBatch, rs.cfg.Window)

	_, err := st.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}}, time.Hour,
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "j1"})
	claimed, err := st.Claim(ctx, store.ClaimParams{Worker: "w", Instance: "i1", Limit: 1, Tasks: []string{"t"}, Lease: time.Minute,
		Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	started := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
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

	cons, err := js.CreateOrUpdateConsumer(ctx, subjects.ResultStream(), jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for len(msgs) < 2 {
		batch, err := cons.Fetch(2-len(msgs), jetstream.FetchMaxWait(serviceWait))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			msgs = append(msgs, msg)
		}
		require.NoError(t, batch.Error())
	}
	rs.apply(ctx, msgs)

	job, err := st.Get(ctx, "g", "j1")
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, job.State)
	require.JSONEq(t, `{"ok":true}`, string(job.Result))
	require.NotNil(t, job.Started)
	require.True(t, started.Equal(*job.Started), "started %s, not the end's time %s", started, *job.Started)
	require.Equal(t, fairway.StateSuccess, f.state("j1"), "the end is followed up")
	require.Zero(t, f.kicked(), "no start of its own: its event goes with the end's follow-up")

	deadMsgs := readStream(t, js, subjects.DeadStream(), 1)
	require.Equal(t, subjects.Dead(events.DeadReport), deadMsgs[0].Subject())
	require.Contains(t, deadMsgs[0].Headers().Get(events.HeaderDeadReason), "undecodable executor report")
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	}, serviceWait, 10*time.Millisecond, "every message is acknowledged")
}
