package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// request sends a raw API request and decodes the reply.
func (h *harness) request(subject, body string) events.Reply {
	h.t.Helper()
	msg, err := h.nc.Request(subject, []byte(body), waitTimeout)
	require.NoError(h.t, err)
	var reply events.Reply
	require.NoError(h.t, json.Unmarshal(msg.Data, &reply))
	return reply
}

// TestSameIDInTwoGroupsMakesTwoJobs: job ids are unique per group. A tenant
// that submits with an id another group uses gets a job of its own, and the
// tenant API never returns or reveals the other group's job.
func TestSameIDInTwoGroupsMakesTwoJobs(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	acme, err := h.client.SubmitWait(ctx, fairway.Submission{ID: "invoice-7", Group: "acme", Task: "echo", Args: json.RawMessage(`{"secret":"acme"}`)})
	require.NoError(t, err)
	require.Equal(t, "acme", acme.Group)
	globex, err := h.client.SubmitWait(ctx, fairway.Submission{ID: "invoice-7", Group: "globex", Task: "echo", Args: json.RawMessage(`{"mine":"globex"}`)})
	require.NoError(t, err)
	require.Equal(t, "globex", globex.Group, "submit answers with the tenant's own new job")
	require.JSONEq(t, `{"mine":"globex"}`, string(globex.Args))
	require.NotContains(t, string(globex.Args), "secret")

	for group, args := range map[string]string{"acme": `{"secret":"acme"}`, "globex": `{"mine":"globex"}`} {
		job, err := h.client.Get(ctx, group, "invoice-7")
		require.NoError(t, err)
		require.Equal(t, group, job.Group)
		require.JSONEq(t, args, string(job.Args))
		jobs, err := h.client.List(ctx, events.ListRequest{Group: group})
		require.NoError(t, err)
		require.Len(t, jobs, 1, group)
	}
	// Asking for it in a third group finds nothing.
	_, err = h.client.Get(ctx, "initech", "invoice-7")
	require.ErrorIs(t, err, fairway.ErrNotFound)
	// Cancelling globex's job leaves acme's alone.
	_, err = h.client.Cancel(ctx, "globex", "invoice-7")
	require.NoError(t, err)
	job, err := h.client.Get(ctx, "acme", "invoice-7")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)
}

// TestTrackersArePerGroup: the same tracker in two groups is accepted in
// both; a refusal names only a job of the same group.
func TestTrackersArePerGroup(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	acme, err := h.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", Tracker: "nightly"})
	require.NoError(t, err)
	globex, err := h.client.SubmitWait(ctx, fairway.Submission{Group: "globex", Task: "echo", Tracker: "nightly"})
	require.NoError(t, err, "another group's tracker blocks nothing")
	require.NotEqual(t, acme.ID, globex.ID)
	_, err = h.client.SubmitWait(ctx, fairway.Submission{Group: "globex", Task: "echo", Tracker: "nightly"})
	require.ErrorIs(t, err, fairway.ErrDuplicate)
	var ferr *fairway.Error
	require.ErrorAs(t, err, &ferr)
	require.Equal(t, globex.ID, ferr.JobID, "the refusal names the group's own job")
	require.NotContains(t, ferr.Message, acme.ID, "and never another group's")
}

// TestOperatorAPINamesJobsByGroup: job ids are unique per group only, so
// the operator API needs the group in the body; the tenant API takes the
// subject's group and refuses a body naming another.
func TestOperatorAPINamesJobsByGroup(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	for _, g := range []string{"acme", "globex"} {
		_, err := h.client.SubmitWait(ctx, fairway.Submission{ID: "job-1", Group: g, Task: "echo", Args: json.RawMessage(`{"g":"` + g + `"}`)})
		require.NoError(t, err)
	}
	reply := h.request("fairway.admin.get", `{"id":"job-1"}`)
	require.NotNil(t, reply.Error)
	require.Equal(t, fairway.CodeInvalid, reply.Error.Code)
	require.Equal(t, "group", reply.Error.Field)
	reply = h.request("fairway.admin.get", `{"group":"globex","id":"job-1"}`)
	require.Nil(t, reply.Error)
	require.Equal(t, "globex", reply.Job.Group)
	require.JSONEq(t, `{"g":"globex"}`, string(reply.Job.Args))
	reply = h.request("fairway.admin.cancel", `{"group":"acme","id":"job-1"}`)
	require.Nil(t, reply.Error)
	require.Equal(t, fairway.StateCancelled, reply.Job.State)
	require.Equal(t, "acme", reply.Job.Group)

	reply = h.request("fairway.api.acme.get", `{"group":"globex","id":"job-1"}`)
	require.NotNil(t, reply.Error, "a tenant cannot name another group")
	require.Equal(t, "group", reply.Error.Field)
	require.Nil(t, reply.Job)
	reply = h.request("fairway.api.acme.get", `{"group":"acme","id":"job-1"}`)
	require.Nil(t, reply.Error)
	require.Equal(t, "acme", reply.Job.Group)
}

// publishUntilStored publishes msg to JetStream until the stream stores it
// rather than dropping it as a duplicate of an earlier Nats-Msg-Id, and
// fails the test if that does not happen within bound. JetStream keeps
// the ids of the submit stream for its duplicate window only.
func publishUntilStored(t *testing.T, js jetstream.JetStream, msg *nats.Msg, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ack, err := js.PublishMsg(t.Context(), msg)
		require.NoError(t, err)
		if !ack.Duplicate {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JetStream still drops %s (Nats-Msg-Id %s) as a duplicate after %s", msg.Subject, msg.Header.Get(jetstream.MsgIDHeader), bound)
		}
		time.Sleep(20 * time.Millisecond) // JetStream gives no signal when its window has passed
	}
}

// TestMsgIDOfOneGroupDoesNotDropAnothersSubmission: JetStream de-duplicates
// by Nats-Msg-Id across its whole stream, so a tenant could make another
// tenant's asynchronous submission vanish. The submit stream's window is
// the 100 ms minimum, and the job made from a body without id takes the
// Nats-Msg-Id as its id, in its own group.
func TestMsgIDOfOneGroupDoesNotDropAnothersSubmission(t *testing.T) {
	t.Parallel()
	h := setup(t)
	js, err := jetstream.New(h.nc)
	require.NoError(t, err)
	msg := func(group string) *nats.Msg {
		m := &nats.Msg{Subject: "fairway.submit." + group + ".echo", Data: []byte(`{"args":{"from":"` + group + `"}}`), Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, "order-1")
		return m
	}
	publishUntilStored(t, js, msg("evil"), time.Second)
	publishUntilStored(t, js, msg("acme"), 5*time.Second)
	var groups []string
	h.until(func(ev events.Event) bool {
		if ev.JobID == "order-1" && ev.State == fairway.StateWaiting {
			groups = append(groups, ev.Group)
		}
		return len(groups) == 2
	})
	require.ElementsMatch(t, []string{"evil", "acme"}, groups)
	job, err := h.client.Get(t.Context(), "acme", "order-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"from":"acme"}`, string(job.Args))
}

// TestSameMessageTwiceMakesOneJob: a submission without an id in its body,
// published twice under one Nats-Msg-Id (past JetStream's window), is one
// job whose id is the Nats-Msg-Id, as the README promises.
func TestSameMessageTwiceMakesOneJob(t *testing.T) {
	t.Parallel()
	h := setup(t)
	js, err := jetstream.New(h.nc)
	require.NoError(t, err)
	m := &nats.Msg{Subject: "fairway.submit.acme.echo", Data: []byte(`{"args":{"n":1}}`), Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, "sub-1")
	publishUntilStored(t, js, m, time.Second)
	h.until(func(ev events.Event) bool { return ev.JobID == "sub-1" && ev.Group == "acme" })
	publishUntilStored(t, js, m, 5*time.Second)
	// A marker published after: once its event arrives, the copy has been
	// ingested (one coordinator ingests in stream order).
	marker := submit(t, h, fairway.Submission{Group: "acme", Task: "echo"})
	evs := h.until(func(ev events.Event) bool { return ev.JobID == marker })
	for _, ev := range evs {
		require.NotEqual(t, "sub-1", ev.JobID, "the copy made no new event")
	}
	jobs, err := h.client.List(t.Context(), events.ListRequest{Group: "acme"})
	require.NoError(t, err)
	require.Len(t, jobs, 2, "sub-1 and the marker")
	job, err := h.client.Get(t.Context(), "acme", "sub-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(job.Args))
}

// TestRedeliveredSubmissionMakesOneJob: a stream message delivered again
// (its ack was lost, or the coordinator died between the commit and the
// ack) makes no second job, with or without a Nats-Msg-Id: its id is the
// Nats-Msg-Id, or derived from the stream sequence, the same on every
// delivery.
func TestRedeliveredSubmissionMakesOneJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	coord, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	// Not started (the test hands it the deliveries): its journal engine
	// alone runs.
	require.NoError(t, coord.RunJournal(ctx))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subjects := events.NewSubjects("")
	require.NoError(t, events.EnsureStreams(ctx, js, subjects, events.StreamOptions{}))
	_, err = js.Publish(ctx, "fairway.submit.acme.echo", []byte(`{"args":{"no":"header"}}`))
	require.NoError(t, err)
	withID := &nats.Msg{Subject: "fairway.submit.acme.echo", Data: []byte(`{"args":{"with":"header"}}`), Header: nats.Header{}}
	withID.Header.Set(jetstream.MsgIDHeader, "client-42")
	_, err = js.PublishMsg(ctx, withID)
	require.NoError(t, err)

	cons, err := js.CreateOrUpdateConsumer(ctx, subjects.SubmitStream(), jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	fetch := func() []jetstream.Msg {
		batch, err := cons.Fetch(2, jetstream.FetchMaxWait(waitTimeout))
		require.NoError(t, err)
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		require.NoError(t, batch.Error())
		require.Len(t, msgs, 2)
		return msgs
	}
	first := fetch()
	for _, m := range first {
		require.NoError(t, m.Nak()) // delivered again at once
	}
	again := fetch()
	for i, m := range again {
		meta, err := m.Metadata()
		require.NoError(t, err)
		require.Equal(t, uint64(2), meta.NumDelivered, "a redelivery")
		firstMeta, err := first[i].Metadata()
		require.NoError(t, err)
		require.Equal(t, firstMeta.Sequence.Stream, meta.Sequence.Stream, "of the same message")
	}
	coord.Ingest(ctx, first)
	coord.Ingest(ctx, again)

	jobs, err := coord.Unfinished(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, 2, jobs, "one job per message, whatever the deliveries")
	job, err := coord.Job(ctx, "acme", "client-42")
	require.NoError(t, err, "the job id is the Nats-Msg-Id")
	require.JSONEq(t, `{"with":"header"}`, string(job.Args))
}

// TestForgedReportDoesNotApply: a report that names a running job's group,
// id, attempt and executor, but not the instance holding it, changes
// nothing: the job ends as its real executor says.
func TestForgedReportDoesNotApply(t *testing.T) {
	t.Parallel()
	h := setup(t)
	started := make(chan *executor.Job, 1)
	h.executor("ex1", 1, map[string]executor.Handler{"block": func(ctx context.Context, job *executor.Job) error {
		started <- job
		<-ctx.Done()
		return ctx.Err()
	}})
	id := submit(t, h, fairway.Submission{Group: "acme", Task: "block"})
	var job *executor.Job
	select {
	case job = <-started:
	case <-time.After(waitTimeout):
		t.Fatal("the job did not start")
	}
	h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateRunning })
	js, err := jetstream.New(h.nc)
	require.NoError(t, err)
	// Raw JSON, as any client could publish it.
	for _, forged := range []string{
		`{"type":"done","group":"acme","job_id":"` + id + `","attempt":1,"executor":"ex1","instance":"forged","outcome":"success","result":{"forged":true}}`,
		`{"type":"done","group":"acme","job_id":"` + id + `","attempt":1,"executor":"ex1","outcome":"success","result":{"forged":true}}`,
		`{"type":"progress","group":"acme","job_id":"` + id + `","attempt":1,"executor":"ex1","progress":99}`,
	} {
		_, err = js.Publish(t.Context(), "fairway.results.ex1", []byte(forged))
		require.NoError(t, err)
	}
	// The real end comes after the forged reports in the stream.
	_, err = h.client.Cancel(t.Context(), "acme", id)
	require.NoError(t, err)
	evs := h.final(id)
	require.Equal(t, fairway.StateCancelled, evs[len(evs)-1].State, "the forged success did not apply: %v", transitions(evs))
	got, err := h.client.Get(t.Context(), "acme", id)
	require.NoError(t, err)
	require.Empty(t, got.Result)
	require.Zero(t, got.Progress)
	require.Equal(t, 1, job.Attempt)
}
