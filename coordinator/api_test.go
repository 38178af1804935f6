package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// apiHarness is a coordinator with a config of the test's and a client.
type apiHarness struct {
	ns     *server.Server
	nc     *nats.Conn
	coord  *coordinator.Coordinator
	client *events.Client
}

func apiSetup(t *testing.T, cfg coordinator.Config, ns *server.Server, nc *nats.Conn) *apiHarness {
	t.Helper()
	if ns == nil {
		ns, nc = natstest.Start(t)
	}
	cfg.Logger = testLogger(t)
	coord, err := coordinator.New(storetest.Public(storetest.Open(t)), nc, cfg)
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	return &apiHarness{ns: ns, nc: nc, coord: coord, client: client}
}

// startNATS starts an embedded NATS server with the given max_payload.
func startNATS(t *testing.T, maxPayload int32) (*server.Server, *nats.Conn) {
	t.Helper()
	ns, err := natsserver.Start(natsserver.Options{StoreDir: t.TempDir(), Port: -1, MaxPayload: maxPayload})
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := natsserver.Connect(ns, t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return ns, nc
}

// bigArgs is a JSON object of about n bytes.
func bigArgs(n int) json.RawMessage {
	return json.RawMessage(`{"blob":"` + strings.Repeat("x", n-11) + `"}`)
}

// A list over jobs whose args together exceed max_payload used to get no
// answer at all (the reply was dropped). Now a list leaves args out unless
// asked, and a full list is paged below the cap with a cursor.
func TestListOverLargeArgsIsPagedBelowMaxPayload(t *testing.T) {
	t.Parallel()
	h := apiSetup(t, coordinator.Config{}, nil, nil)
	ctx := t.Context()
	const n = 12 // 12 × 900 KiB > 8 MiB
	var ids []string
	for i := range n {
		job, err := h.client.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "big", ID: fmt.Sprintf("big-%02d", i), Args: bigArgs(900 << 10)})
		require.NoError(t, err)
		ids = append([]string{job.ID}, ids...) // newest first
	}

	jobs, next, err := h.client.ListPage(ctx, events.ListRequest{Group: "a", Limit: n})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, jobs, n)
	for i, j := range jobs {
		require.Equal(t, ids[i], j.ID)
		require.Equal(t, "null", string(j.Args), "args only with full")
	}

	var full []string
	pages := 0
	req := events.ListRequest{Group: "a", Limit: n, Full: true}
	for {
		jobs, next, err := h.client.ListPage(ctx, req)
		require.NoError(t, err)
		require.NotEmpty(t, jobs)
		pages++
		for _, j := range jobs {
			require.Len(t, j.Args, 900<<10)
			full = append(full, j.ID)
		}
		if next == "" {
			break
		}
		req.Cursor = next
	}
	require.Equal(t, ids, full, "every job once, newest first")
	require.Greater(t, pages, 1, "12 × 900 KiB do not fit in one 8 MiB reply")

	all, err := h.client.List(ctx, events.ListRequest{Group: "a", Limit: n, Full: true})
	require.NoError(t, err)
	require.Len(t, all, n, "List follows the cursor up to its limit")

	// limit pages too.
	jobs, next, err = h.client.ListPage(ctx, events.ListRequest{Group: "a", Limit: 5})
	require.NoError(t, err)
	require.Len(t, jobs, 5)
	require.NotEmpty(t, next)
	jobs, next, err = h.client.ListPage(ctx, events.ListRequest{Group: "a", Limit: 10, Cursor: next})
	require.NoError(t, err)
	require.Len(t, jobs, 7)
	require.Equal(t, ids[5:], []string{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[3].ID, jobs[4].ID, jobs[5].ID, jobs[6].ID})
	require.Empty(t, next)

	_, _, err = h.client.ListPage(ctx, events.ListRequest{Group: "a", Cursor: "nonsense"})
	var fe *fairway.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, fairway.CodeInvalid, fe.Code)
	require.Equal(t, "cursor", fe.Field)
}

// A job whose args and result together exceed max_payload used to get no
// answer to get; now it is answered without them, and named in truncated.
func TestGetOfJobTooLargeForAReplyIsCut(t *testing.T) {
	t.Parallel()
	ns, nc := startNATS(t, 2<<20)
	h := apiSetup(t, coordinator.Config{}, ns, nc)
	ctx := t.Context()
	done := make(chan events.Event, 10)
	sub, err := h.client.Subscribe(ctx, events.Filter{Group: "a", State: fairway.StateSuccess}, func(ev events.Event) { done <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	enc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(enc.Close)
	ex, err := executor.New(enc, executor.Config{AppID: "ex", PoolSize: 1, Logger: testLogger(t)})
	require.NoError(t, err)
	ex.Handle("echo", func(_ context.Context, job *executor.Job) error {
		return job.SetResult(json.RawMessage(job.Args))
	})
	require.NoError(t, ex.Start(ctx))
	t.Cleanup(ex.Stop)

	_, err = h.client.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "echo", ID: "huge", Args: bigArgs(1 << 20)})
	require.NoError(t, err)
	select {
	case ev := <-done:
		require.Equal(t, "huge", ev.JobID)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	reply := request(t, h.nc, h.client.Subjects().API("a", events.VerbGet), []byte(`{"id":"huge"}`))
	require.Nil(t, reply.Error)
	require.Equal(t, []string{"huge"}, reply.Truncated)
	require.Equal(t, fairway.StateSuccess, reply.Job.State)
	require.Equal(t, "null", string(reply.Job.Args))
	require.Empty(t, reply.Job.Result)

	// A full list shows it the same way, one job a page.
	reply = request(t, h.nc, h.client.Subjects().API("a", events.VerbList), []byte(`{"full":true}`))
	require.Nil(t, reply.Error)
	require.Len(t, reply.Jobs, 1)
	require.Equal(t, []string{"huge"}, reply.Truncated)
}

// apiGate holds the API requests its hook picks (entered gets one per
// request held) until open; replies collects the answers to requests
// whose reply subject is inbox.<name>.
type apiGate struct {
	entered chan struct{}
	replies chan *nats.Msg
	inbox   string
	release chan struct{}
	once    sync.Once
}

// holdAPI makes the coordinator of h hold the requests of the groups for
// which hold says so; they go on when the gate opens, at the latest when
// the test ends.
func holdAPI(t *testing.T, h *apiHarness, hold func(group string) bool) *apiGate {
	t.Helper()
	g := &apiGate{entered: make(chan struct{}, 100), replies: make(chan *nats.Msg, 100), inbox: nats.NewInbox(), release: make(chan struct{})}
	h.coord.SetAPIHook(func(group, _ string) {
		if hold(group) {
			g.entered <- struct{}{}
			<-g.release
		}
	})
	t.Cleanup(g.open)
	sub, err := h.nc.ChanSubscribe(g.inbox+".*", g.replies)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return g
}

func (g *apiGate) open() { g.once.Do(func() { close(g.release) }) }

// Each coordinator used to answer API requests one at a time: one slow
// request stalled every tenant. Now group b is answered while group a has
// requests in flight, and a takes no more than its share of the workers.
func TestAPIAnswersOtherGroupsWhileOneIsBusy(t *testing.T) {
	t.Parallel()
	h := apiSetup(t, coordinator.Config{APIGroupWorkers: 4}, nil, nil) // 16 workers, a group runs at most 4 at once
	var running atomic.Int32
	gate := holdAPI(t, h, func(group string) bool {
		if group != "a" {
			return false
		}
		running.Add(1)
		return true
	})
	entered, replies, inbox := gate.entered, gate.replies, gate.inbox
	const n = 10
	for i := range n {
		require.NoError(t, h.nc.PublishRequest(h.client.Subjects().API("a", events.VerbGet), fmt.Sprintf("%s.%d", inbox, i), []byte(`{"id":"x"}`)))
	}
	for range 4 {
		<-entered
	}
	// b's request follows a's ten on the same connection, so the
	// coordinator has queued all of a's when it answers b's.
	_, err := h.client.Get(t.Context(), "b", "nope")
	require.ErrorIs(t, err, fairway.ErrNotFound, "b is answered while a has requests in flight")
	require.EqualValues(t, 4, running.Load(), "a runs at most api-group-workers at once")

	gate.open()
	for range n {
		select {
		case msg := <-replies:
			var reply events.Reply
			require.NoError(t, json.Unmarshal(msg.Data, &reply))
			require.Equal(t, fairway.CodeNotFound, reply.Error.Code)
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// A full queue answers unavailable at once, and a group with its share of
// the queue waiting gets quota, instead of waiting.
func TestAPIQueueRefusesWhenFull(t *testing.T) {
	t.Parallel()
	// One worker, one request per group waiting, eight in all.
	h := apiSetup(t, coordinator.Config{APIWorkers: 1, APIQueue: 8}, nil, nil)
	gate := holdAPI(t, h, func(string) bool { return true })
	entered, replies, inbox := gate.entered, gate.replies, gate.inbox
	send := func(name, group string) {
		require.NoError(t, h.nc.PublishRequest(h.client.Subjects().API(group, events.VerbGet), inbox+"."+name, []byte(`{"id":"x"}`)))
	}
	send("a1", "a") // runs
	<-entered
	send("a2", "a") // waits
	send("a3", "a") // a's share waits already: quota
	for i := range 7 {
		send(fmt.Sprintf("g%d", i), fmt.Sprintf("g%d", i)) // wait: 8 in all
	}
	send("z", "z") // queue full: unavailable
	got := map[string]fairway.Code{}
	next := func() {
		select {
		case msg := <-replies:
			var reply events.Reply
			require.NoError(t, json.Unmarshal(msg.Data, &reply))
			name := msg.Subject[len(inbox)+1:]
			got[name] = reply.Error.Code
			if name == "a3" {
				require.Contains(t, reply.Error.Message, "share")
			}
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	next()
	next()
	require.Equal(t, map[string]fairway.Code{"a3": fairway.CodeQuota, "z": fairway.CodeUnavailable}, got, "refused at once, while a1 is in flight")
	gate.open()
	for range 9 {
		next()
	}
	require.Len(t, got, 11)
	for name, code := range got {
		if name != "a3" && name != "z" {
			require.Equal(t, fairway.CodeNotFound, code, name)
		}
	}
}

// A group over its API rate gets quota, naming the limit and when to
// retry; other groups and operators are not affected.
func TestAPIRateQuota(t *testing.T) {
	t.Parallel()
	h := apiSetup(t, coordinator.Config{APIRate: 0.001, APIBurst: 2}, nil, nil)
	ctx := t.Context()
	for range 2 {
		_, err := h.client.Get(ctx, "a", "x")
		require.ErrorIs(t, err, fairway.ErrNotFound)
	}
	_, err := h.client.Get(ctx, "a", "x")
	require.ErrorIs(t, err, fairway.ErrQuota)
	require.Contains(t, err.Error(), "0.001 requests/s (burst 2)")
	require.Contains(t, err.Error(), "retry in")
	_, err = h.client.Get(ctx, "b", "x")
	require.ErrorIs(t, err, fairway.ErrNotFound, "another group has its own quota")
	for range 3 {
		_, err := h.client.List(ctx, events.ListRequest{})
		require.NoError(t, err, "the operator API has no quota")
	}
}

// logs is paged with a cursor (store's TestLogLinesPagesAndCutsLongMessages
// checks the cut of long messages: the executor cuts them at 8 KiB itself).
func TestLogsArePaged(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.executor("ex1", 1, map[string]executor.Handler{"chatty": func(_ context.Context, job *executor.Job) error {
		for i := range 30 {
			job.Logger.Info(fmt.Sprintf("line %02d", i))
		}
		return nil
	}})
	id := submit(t, h, fairway.Submission{Group: "acme", Task: "chatty"})
	h.final(id)
	ctx := t.Context()
	var all []fairway.LogLine
	req, pages := events.LogsRequest{ID: id, Limit: 10}, 0
	for {
		lines, next, err := h.client.LogsPage(ctx, "acme", req)
		require.NoError(t, err)
		require.LessOrEqual(t, len(lines), 10)
		all = append(all, lines...)
		pages++
		if next == "" {
			break
		}
		req.Cursor = next
	}
	require.Len(t, all, 30)
	require.GreaterOrEqual(t, pages, 3)
	for i, l := range all {
		require.Contains(t, l.Message, fmt.Sprintf("line %02d", i))
	}
	lines, err := h.client.Logs(ctx, "acme", id)
	require.NoError(t, err)
	require.Len(t, lines, 30, "Logs follows every page")
	_, _, err = h.client.LogsPage(ctx, "acme", events.LogsRequest{ID: id, Limit: 10001})
	require.True(t, errors.Is(err, fairway.ErrInvalid), "%v", err)
}
