package isolation_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestRogueExecutorCannotGatherJobs: a rogue executor registered with 2
// slots (as its credential may) parks twenty dispatch requests at once,
// each asking for 100,000 slots under a request id of its own, before
// globex submits 300 jobs of its task, and then asks again and again: it
// never holds more than ten times its slots (its pool, as many held ready,
// and the ends on their way, which count until they are applied). Before,
// each request got up to twice the slots, so the rogue gathered as many as
// it asked for.
func TestRogueExecutorCannotGatherJobs(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	rogue := e.connectAs(natsauth.KindExecutor, "rogue")
	reg, _ := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "rogue", Instance: "r1", Host: "h", Slots: 2, Tasks: []string{"export"}}})
	msg, err := rogue.Request("fairway.exec.rogue.register", reg, waitTimeout)
	require.NoError(t, err)
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)

	inbox := nats.NewInbox()
	answers := make(chan *nats.Msg, 100)
	sub, err := rogue.ChanSubscribe(inbox+".*", answers)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ask := func(i int, wait bool) {
		body := fmt.Sprintf(`{"executor":"rogue","instance":"r1","slots":100000,"tasks":["export"],"request_id":"req-%d"}`, i)
		if wait {
			body = fmt.Sprintf(`{"executor":"rogue","instance":"r1","slots":100000,"tasks":["export"],"request_id":"req-%d","wait_ms":3000}`, i)
		}
		require.NoError(t, rogue.PublishRequest("fairway.exec.rogue.dispatch", fmt.Sprintf("%s.%d", inbox, i), []byte(body)))
	}
	for i := range 20 {
		ask(i, true)
	}
	require.NoError(t, rogue.Flush())
	globexEvents := eventsOf(t, e.globexClient)
	var subs []fairway.Submission
	for range 300 {
		subs = append(subs, fairway.Submission{Group: "globex", Task: "export"})
	}
	_, err = e.globexClient.SubmitMany(ctx, subs)
	require.NoError(t, err)
	for range 300 {
		waitEvent(t, globexEvents, "globex's jobs are stored", func(ev events.Event) bool {
			return ev.State == fairway.StateWaiting || ev.State == fairway.StateScheduled
		})
	}
	held := map[string]bool{}
	count := func(m *nats.Msg) {
		var r events.DispatchReply
		require.NoError(t, json.Unmarshal(m.Data, &r))
		for _, j := range r.Jobs {
			held[j.ID] = true
		}
	}
	for range 20 {
		select {
		case m := <-answers:
			count(m)
		case <-ctx.Done():
			t.Fatal("a parked request was never answered")
		}
	}
	for i := 20; i < 120; i++ {
		ask(i, false)
		count(<-answers)
	}
	t.Logf("the rogue holds %d of globex's 300 jobs", len(held))
	require.LessOrEqual(t, len(held), 20, "the rogue gathered more than ten times its 2 slots")
	require.NotEmpty(t, held, "the rogue got no job at all: the test proves nothing")
}
