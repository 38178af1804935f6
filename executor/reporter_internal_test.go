package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestReportsRefusedByAFullShareGoOutWithTheNextInOrder: the executor's
// share of the results stream holds two messages. A report refused while
// it is full goes back to the head of the queue; those published after it
// leave with it, in one message, once the coordinators (here the test's
// consumer) take a message: every report arrives once, in the order
// published, in three messages. The reporter that sent each message alone
// and retried it a second later stored the later reports first, in a
// fourth message.
func TestReportsRefusedByAFullShareGoOutWithTheNextInOrder(t *testing.T) {
	ctx := t.Context()
	_, nc := natstest.Start(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"},
		Retention: jetstream.WorkQueuePolicy, MaxMsgsPerSubject: 2, DiscardNewPerSubject: true, Discard: jetstream.DiscardNew})
	require.NoError(t, err)
	logs := &devtest.Output{}
	r, err := newReporter(nc, "r.executor-1", "R", slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	stop := make(chan struct{})
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		r.run(stop)
	}()
	t.Cleanup(func() {
		close(stop)
		<-ran
	})

	seq := 0
	publish := func(n int) {
		// n+1 reports queued at once (as publish would, one by one, faster
		// than the sender's next try), so that no try takes a part of them.
		r.mu.Lock()
		for range n {
			r.queue = append(r.queue, events.Report{Type: events.ReportDone, Group: "g", JobID: fmt.Sprint(seq), Attempt: 1})
			seq++
		}
		r.mu.Unlock()
		r.publish(events.Report{Type: events.ReportDone, Group: "g", JobID: fmt.Sprint(seq), Attempt: 1})
		seq++
	}
	stored := func(n uint64) {
		t.Helper()
		require.Eventually(t, func() bool {
			info, err := stream.Info(ctx)
			return err == nil && info.State.Msgs == n
		}, 10*time.Second, 5*time.Millisecond)
	}
	publish(0)
	stored(1)
	publish(0)
	stored(2)
	publish(0) // refused: the share is full
	logs.Wait(t, "sending reports to JetStream failed", 10*time.Second)
	require.Contains(t, logs.String(), "maximum messages per subject exceeded")
	publish(99)

	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	var got []string
	messages := 0
	for len(got) < seq {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			messages++
			var reps []events.Report
			require.NoError(t, json.Unmarshal(msg.Data(), &reps))
			for _, rep := range reps {
				got = append(got, rep.JobID)
			}
			require.NoError(t, msg.Ack())
		}
		require.NoError(t, batch.Error())
	}
	want := make([]string, seq)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	require.Equal(t, want, got, "every report once, in the order published")
	require.Equal(t, 3, messages, "the refused report and the 100 after it in one message")

	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, r.drain(fctx), "nothing left to send")
}

// TestReportsOnAClosedConnectionAreDroppedAtOnce: a connection closed for
// good takes no report: flush says so in the log and returns at once,
// rather than trying until its timeout.
func TestReportsOnAClosedConnectionAreDroppedAtOnce(t *testing.T) {
	_, nc := natstest.Start(t)
	logs := &devtest.Output{}
	r, err := newReporter(nc, "r.executor-1", "R", slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	nc.Close()
	r.publish(events.Report{Type: events.ReportDone, Group: "g", JobID: "a", Attempt: 1})
	r.publish(events.Report{Type: events.ReportDone, Group: "g", JobID: "b", Attempt: 1})
	require.NoError(t, r.flush(10*time.Second), "nothing left to retry")
	require.Contains(t, logs.String(), "the NATS connection is closed; dropping them")
	require.Contains(t, logs.String(), "reports=2")
}
