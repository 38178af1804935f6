package isolation_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestExecutorCredentialBoundsWhatItRuns: an executor credential issued
// for task export, acme's jobs and 2 slots (fairway creds add executor
// rogue --tasks export --groups acme --slots 2) cannot register another
// task or more slots, and gets acme's export jobs only, never globex's,
// whatever its requests name. The grant is read from the credential
// itself, as the NATS server reports the sender.
func TestExecutorCredentialBoundsWhatItRuns(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	path := filepath.Join(e.dir, "executor-rogue-granted.creds")
	require.NoError(t, e.keys.WriteCredsWith(path, natsauth.KindExecutor, "rogue",
		natsauth.User{Grant: events.Grant{Tasks: []string{"export"}, Groups: []string{"acme"}, Slots: 2}}))
	nc, err := nats.Connect(e.url, nats.UserCredentials(path))
	require.NoError(t, err)
	t.Cleanup(nc.Close)

	register := func(slots int, tasks ...string) *fairway.Error {
		t.Helper()
		data, _ := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "rogue", Instance: "r1", Host: "h", Slots: slots, Tasks: tasks}})
		msg, err := nc.Request("fairway.exec.rogue.register", data, waitTimeout)
		require.NoError(t, err)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		return reply.Error
	}
	refused := register(2, "export", "block")
	require.NotNil(t, refused, "registered a task its credential does not grant")
	require.Equal(t, "tasks", refused.Field)
	t.Logf("refused: %s", refused.Message)
	refused = register(3, "export")
	require.NotNil(t, refused, "registered more slots than granted")
	require.Equal(t, "slots", refused.Field)
	require.Nil(t, register(2, "export"))

	globexEvents, acmeEvents := eventsOf(t, e.globexClient), eventsOf(t, e.acmeClient)
	for group, c := range map[string]*events.Client{"acme": e.acmeClient, "globex": e.globexClient} {
		var subs []fairway.Submission
		for range 5 {
			subs = append(subs, fairway.Submission{Group: group, Task: "export", Args: json.RawMessage(`{"secret":1}`)})
		}
		_, err := c.SubmitMany(ctx, subs)
		require.NoError(t, err)
	}
	for _, ch := range []<-chan events.Event{globexEvents, acmeEvents} {
		for range 5 {
			waitEvent(t, ch, "the export jobs are stored", func(ev events.Event) bool { return ev.State == fairway.StateWaiting })
		}
	}
	ask := func(body string) events.DispatchReply {
		t.Helper()
		msg, err := nc.Request("fairway.exec.rogue.dispatch", []byte(body), waitTimeout)
		require.NoError(t, err)
		var reply events.DispatchReply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.Nil(t, reply.Error)
		return reply
	}
	require.Empty(t, ask(`{"executor":"rogue","instance":"r1","slots":100,"tasks":["export"],"groups":["globex"]}`).Jobs,
		"got jobs of a group its credential does not grant")
	got := 0
	for got < 5 {
		r := ask(`{"executor":"rogue","instance":"r1","slots":100,"tasks":["export","block","echo"]}`)
		require.NotEmpty(t, r.Jobs)
		require.LessOrEqual(t, len(r.Jobs), 4, "twice the 2 slots granted")
		for _, j := range r.Jobs {
			require.Equal(t, "acme", j.Group, "got another group's job")
			require.Equal(t, "export", j.Task)
		}
		got += len(r.Jobs)
	}
	require.Empty(t, ask(`{"executor":"rogue","instance":"r1","slots":100,"tasks":["export","block","echo"]}`).Jobs,
		"acme's are all taken: globex's are never handed out")
}
