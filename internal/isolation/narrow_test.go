package isolation_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestNarrowExecutorCredentialByDefault: 'fairway creds add executor'
// issues no credential unless it says what it may run, and one issued for
// task export of acme cannot register another task, nor get globex's
// jobs, whatever it asks.
func TestNarrowExecutorCredentialByDefault(t *testing.T) {
	e := setup(t)
	path := filepath.Join(e.dir, "executor-rogue-narrow.creds")
	creds := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := cli.Main(t.Context(), nil, append([]string{"creds", "add", "executor", "rogue", "--keys", filepath.Join(e.dir, "keys"),
			"--dev-dir", e.dir, "--out", path, "--push=false"}, args...), &out, &errOut)
		return code, errOut.String()
	}
	code, errOut := creds()
	require.Equal(t, 2, code, "issued an executor credential that says nothing of what it may run")
	require.Contains(t, errOut, "--tasks a,b or --any-task; --groups g1,g2 or --any-group")
	require.NoFileExists(t, path)
	code, errOut = creds("--tasks", "export", "--groups", "acme")
	require.Equal(t, 0, code, errOut)

	nc, err := nats.Connect(e.url, nats.UserCredentials(path))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	register := func(tasks ...string) *fairway.Error {
		t.Helper()
		data, _ := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "rogue", Instance: "r1", Host: "h", Slots: 4, Tasks: tasks}})
		msg, err := nc.Request("fairway.exec.rogue.register", data, waitTimeout)
		require.NoError(t, err)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		return reply.Error
	}
	for _, tasks := range [][]string{{"echo"}, {"export", "block"}} {
		refused := register(tasks...)
		require.NotNil(t, refused, "registered %v with a credential for export only", tasks)
		require.Equal(t, "tasks", refused.Field)
	}
	require.Nil(t, register("export"))

	globexEvents := eventsOf(t, e.globexClient)
	_, err = e.globexClient.Submit(t.Context(), fairway.Submission{Group: "globex", Task: "export", Args: json.RawMessage(`{"secret":1}`)})
	require.NoError(t, err)
	waitEvent(t, globexEvents, "globex's export job is stored", func(ev events.Event) bool { return ev.State == fairway.StateWaiting })
	msg, err := nc.Request("fairway.exec.rogue.dispatch", []byte(`{"executor":"rogue","instance":"r1","slots":4,"tasks":["export"],"groups":["globex"]}`), waitTimeout)
	require.NoError(t, err)
	var reply events.DispatchReply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)
	require.Empty(t, reply.Jobs, "got a job of a group its credential does not grant")
}
