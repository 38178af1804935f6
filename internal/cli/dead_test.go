package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestDeadLettersList(t *testing.T) {
	c := startCluster(t)
	nc, err := nats.Connect(c.url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	subjects := events.NewSubjects("fairway")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.Publish(t.Context(), subjects.Results("ghost"), []byte("{not json"))
	require.NoError(t, err)
	// Read it from the stream, not from a plain subscription (which may
	// see the message before the stream has stored it).
	dead, err := js.OrderedConsumer(t.Context(), subjects.DeadStream(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	_, err = dead.Next(jetstream.FetchMaxWait(waitTimeout))
	require.NoError(t, err)

	code, out, errOut := run(t, "dead-letters", "list", "--json", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	var letters []events.DeadLetter
	require.NoError(t, json.Unmarshal([]byte(out), &letters))
	require.Len(t, letters, 1)
	require.Equal(t, events.DeadReport, letters[0].Kind)
	require.Equal(t, "fairway.results.ghost", letters[0].Subject)
	require.Equal(t, "{not json", letters[0].Body)

	code, out, errOut = run(t, "dead-letters", "list", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "fairway.results.ghost")
	require.Contains(t, out, "undecodable executor report")
}
