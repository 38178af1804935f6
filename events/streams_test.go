package events_test

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// startCluster starts a JetStream cluster of n embedded servers and returns
// a connection to it once it has a meta leader. A server that does not
// start (its cluster port, picked free, was taken by another process
// before it listened; a machine under load) has the cluster started again
// on other ports, three times at most.
func startCluster(t *testing.T, n int) *nats.Conn {
	t.Helper()
	var urls []string
	for try := 1; ; try++ {
		var failed error
		urls, failed = tryCluster(t, n)
		if failed == nil {
			break
		}
		require.Less(t, try, 3, "starting a cluster of %d servers: %v", n, failed)
		t.Logf("starting the cluster again: %v", failed)
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := js.AccountInfo(t.Context())
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the cluster elected no JetStream meta leader")
	return nc
}

// tryCluster starts the servers of a cluster of n and returns their client
// URLs, or shuts them down and says which did not start.
func tryCluster(t *testing.T, n int) ([]string, error) {
	t.Helper()
	// JetStream needs every server's routes configured up front, so the
	// cluster ports are picked first.
	routes := make([]*url.URL, n)
	for i := range routes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		routes[i] = &url.URL{Scheme: "nats", Host: ln.Addr().String()}
		require.NoError(t, ln.Close())
	}
	var servers []*server.Server
	var urls []string
	for i := range n {
		port, err := strconv.Atoi(routes[i].Port())
		require.NoError(t, err)
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("s%d", i),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "fairway-test", Host: "127.0.0.1", Port: port},
			Routes:     routes,
		})
		require.NoError(t, err)
		go s.Start()
		servers = append(servers, s)
		if !s.ReadyForConnections(20 * time.Second) {
			for _, s := range servers {
				s.Shutdown()
				s.WaitForShutdown()
			}
			return nil, fmt.Errorf("server %d did not start", i)
		}
		urls = append(urls, s.ClientURL())
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
	return urls, nil
}

// TestEnsureStreamsUpdatesReplicas raises and lowers the replica count of
// existing streams on a three-server cluster.
func TestEnsureStreamsUpdatesReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-server NATS cluster")
	}
	nc := startCluster(t, 3)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subjects := events.NewSubjects("fairway")
	for _, replicas := range []int{1, 3, 1} {
		require.NoError(t, events.EnsureStreams(t.Context(), js, subjects, events.StreamOptions{Replicas: replicas}))
		for _, name := range []string{subjects.SubmitStream(), subjects.EventStream(), subjects.ResultStream()} {
			s, err := js.Stream(t.Context(), name)
			require.NoError(t, err)
			require.Equal(t, replicas, s.CachedInfo().Config.Replicas, "%s", name)
		}
	}
}

// TestEnsureStreamsRefusesReplicasOnOneServer checks the hint given when a
// single server is asked for more than one replica.
func TestEnsureStreamsRefusesReplicasOnOneServer(t *testing.T) {
	t.Parallel()
	_, nc := natstest.Start(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	err = events.EnsureStreams(t.Context(), js, events.NewSubjects("fairway"), events.StreamOptions{Replicas: 3})
	require.ErrorContains(t, err, "a single NATS server keeps 1 replica")
}

// TestStreamLimits: every stream has size limits; the work queues refuse
// new messages when full (the publisher gets an error, nothing is lost
// silently), the events and dead letters drop their oldest.
func TestStreamLimits(t *testing.T) {
	t.Parallel()
	js, subjects := ensuredStreams(t)
	want := map[string]struct {
		bytes   int64
		discard jetstream.DiscardPolicy
	}{
		subjects.SubmitStream(): {events.SubmitMaxBytesDefault, jetstream.DiscardNew},
		subjects.ResultStream(): {events.ResultMaxBytesDefault, jetstream.DiscardNew},
		subjects.EventStream():  {events.EventMaxBytesDefault, jetstream.DiscardOld},
		subjects.DeadStream():   {events.DeadMaxBytesDefault, jetstream.DiscardOld},
	}
	for name, w := range want {
		s, err := js.Stream(t.Context(), name)
		require.NoError(t, err)
		cfg := s.CachedInfo().Config
		require.Equal(t, w.bytes, cfg.MaxBytes, name)
		require.Equal(t, w.discard, cfg.Discard, name)
	}
	dead, err := js.Stream(t.Context(), subjects.DeadStream())
	require.NoError(t, err)
	require.Equal(t, events.DeadMaxAgeDefault, dead.CachedInfo().Config.MaxAge)

	// A full submit stream refuses the next submission.
	require.NoError(t, events.EnsureStreams(t.Context(), js, subjects, events.StreamOptions{SubmitMaxMsgs: 2}))
	for range 2 {
		_, err := js.Publish(t.Context(), subjects.Submit("acme", "echo"), []byte(`{}`))
		require.NoError(t, err)
	}
	_, err = js.Publish(t.Context(), subjects.Submit("acme", "echo"), []byte(`{}`))
	require.ErrorContains(t, err, "maximum messages exceeded")
}

// TestEnsureStreamsRefusesLimitsBeyondStorage: JetStream reserves a file
// stream's MaxBytes from the server's storage, so the default limits (over
// 5 GiB) do not fit a 64 MiB JetStream. The error says so, names the
// configuration key, and is final rather than "not ready, retrying".
func TestEnsureStreamsRefusesLimitsBeyondStorage(t *testing.T) {
	t.Parallel()
	nc := natstest.StartWithStore(t, 64<<20)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	err = events.EnsureStreams(t.Context(), js, events.NewSubjects("fairway"), events.StreamOptions{})
	require.Error(t, err)
	t.Log(err)
	require.True(t, events.IsStreamConfigRefused(err), "a final error, not a wait: %v", err)
	require.ErrorContains(t, err, "creating stream FAIRWAY_SUBMIT with a limit of 1GiB (nats.submit-max-bytes)")
	require.ErrorContains(t, err, "insufficient storage resources")

	// Limits that fit are accepted.
	small := events.StreamOptions{SubmitMaxBytes: 8 << 20, ResultMaxBytes: 8 << 20, EventMaxBytes: 16 << 20, DeadMaxBytes: 4 << 20}
	require.NoError(t, events.EnsureStreams(t.Context(), js, events.NewSubjects("fairway"), small))
}

// TestResultsAreBoundedPerExecutor: one executor whose reports pile up in
// the results stream (a rogue, or coordinators that are down) fills its
// own share, ResultMaxMsgsPerExecutor messages: its next report is refused,
// another executor's is stored.
func TestResultsAreBoundedPerExecutor(t *testing.T) {
	t.Parallel()
	js, subjects := ensuredStreams(t)
	for range events.ResultMaxMsgsPerExecutor {
		_, err := js.Publish(t.Context(), subjects.Results("rogue"), []byte(`[]`))
		require.NoError(t, err)
	}
	_, err := js.Publish(t.Context(), subjects.Results("rogue"), []byte(`[]`))
	require.ErrorContains(t, err, "maximum messages per subject exceeded", "rogue's share is full")
	_, err = js.Publish(t.Context(), subjects.Results("w1"), []byte(`[]`))
	require.NoError(t, err, "another executor's report")
}

// ensuredStreams starts a NATS server with Fairway's streams made, with
// the default options.
func ensuredStreams(t *testing.T) (jetstream.JetStream, events.Subjects) {
	t.Helper()
	_, nc := natstest.Start(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subjects := events.NewSubjects("fairway")
	require.NoError(t, events.EnsureStreams(t.Context(), js, subjects, events.StreamOptions{}))
	return js, subjects
}
