package natsauth_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestAccountsLayout checks the account layout on a real server: a
// tenant's submissions reach FAIRWAY's stream and get their PubAck, its own
// stream captures its group's events and no other's, its API requests get
// answers, and an executor answers a ping and reports under its own app-id
// only.
func TestAccountsLayout(t *testing.T) {
	dir := t.TempDir()
	k, err := natsauth.Open(filepath.Join(dir, "keys"), "fairway", true)
	require.NoError(t, err)
	for _, g := range []string{"acme", "globex"} {
		_, err := k.TenantAccountJWT(g)
		require.NoError(t, err)
	}
	_, err = k.ExecutorAccountJWT("w1")
	require.NoError(t, err)
	s, err := natsserver.Start(natsserver.Options{StoreDir: filepath.Join(dir, "js"), Port: -1, Accounts: k, ResolverDir: filepath.Join(dir, "jwt")})
	require.NoError(t, err)
	defer s.Shutdown()
	conn := func(kind, name string) *nats.Conn {
		p := filepath.Join(dir, kind+name+".creds")
		require.NoError(t, k.WriteCreds(p, kind, name))
		nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(p))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
	ctx := context.Background()
	co := conn(natsauth.KindCoordinator, "c")
	cjs, err := jetstream.New(co)
	require.NoError(t, err)
	_, err = cjs.CreateStream(ctx, jetstream.StreamConfig{Name: "FAIRWAY_SUBMIT", Subjects: []string{"fairway.submit.>"}})
	require.NoError(t, err)
	_, err = cjs.CreateStream(ctx, jetstream.StreamConfig{Name: "FAIRWAY_EVENTS", Subjects: []string{"fairway.events.>"}})
	require.NoError(t, err)
	_, err = cjs.CreateStream(ctx, jetstream.StreamConfig{Name: "FAIRWAY_RESULTS", Subjects: []string{"fairway.results.>"}})
	require.NoError(t, err)

	subjects := events.NewSubjects("")
	for _, g := range []string{"acme", "globex"} {
		require.NoError(t, events.EnsureTenantSubmitStream(ctx, cjs, subjects, g, events.StreamOptions{}))
	}
	acme := conn(natsauth.KindTenant, "acme")
	ajs, err := jetstream.New(acme)
	require.NoError(t, err)
	globex := conn(natsauth.KindTenant, "globex")
	gjs, err := jetstream.New(globex)
	require.NoError(t, err)
	// A tenant publishes to its group's submit subject; its import brings
	// the message to its own stream, under the tenant-submit subject.
	ack, err := ajs.Publish(ctx, "fairway.submit.acme.echo", []byte(`{}`), jetstream.WithMsgID("invoice-1"))
	require.NoError(t, err)
	require.Equal(t, "FAIRWAY_SUBMIT_T_acme", ack.Stream)
	require.False(t, ack.Duplicate)
	// The same Nats-Msg-Id from another tenant at once is not a duplicate:
	// each tenant's stream has its own duplicate window.
	ack, err = gjs.Publish(ctx, "fairway.submit.globex.echo", []byte(`{}`), jetstream.WithMsgID("invoice-1"))
	require.NoError(t, err)
	require.Equal(t, "FAIRWAY_SUBMIT_T_globex", ack.Stream)
	require.False(t, ack.Duplicate, "another tenant's message id dropped globex's submission")
	ack, err = ajs.Publish(ctx, "fairway.submit.acme.echo", []byte(`{}`), jetstream.WithMsgID("invoice-1"))
	require.NoError(t, err)
	require.True(t, ack.Duplicate, "within one tenant a resend is a duplicate")
	tstream, err := cjs.Stream(ctx, "FAIRWAY_SUBMIT_T_acme")
	require.NoError(t, err)
	msg, err := tstream.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "fairway.tenant-submit.acme.echo", msg.Subject)
	_, err = ajs.Publish(ctx, "fairway.submit.globex.echo", []byte(`{}`))
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "a tenant reached another group's submissions")
	_, err = ajs.Publish(ctx, "fairway.tenant-submit.globex.echo", []byte(`{}`))
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "a tenant reached another tenant's stream")
	// What the coordinators' account publishes lands in the shared stream.
	ack, err = cjs.Publish(ctx, "fairway.submit.acme.echo", []byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, "FAIRWAY_SUBMIT", ack.Stream)

	_, err = ajs.CreateStream(ctx, jetstream.StreamConfig{Name: "FAIRWAY_EVENTS", Subjects: []string{"fairway.events.>"}, MaxBytes: 1 << 20})
	require.NoError(t, err)
	_, err = cjs.Publish(ctx, "fairway.events.acme.echo.success", []byte(`a`))
	require.NoError(t, err)
	_, err = cjs.Publish(ctx, "fairway.events.globex.echo.success", []byte(`g`))
	require.NoError(t, err)
	_, err = cjs.Publish(ctx, "fairway.events.acme.echo.success", []byte(`a2`))
	require.NoError(t, err)
	cons, err := ajs.OrderedConsumer(ctx, "FAIRWAY_EVENTS", jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for _, want := range []string{"a", "a2"} {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		require.Equal(t, want, string(msg.Data()), "the tenant's stream holds another group's event")
	}
	_, err = co.Subscribe("fairway.api.*.*", func(m *nats.Msg) { _ = m.Respond([]byte("hi " + m.Subject)) })
	require.NoError(t, err)
	_, err = co.Subscribe("fairway.exec.*.dispatch", func(m *nats.Msg) { _ = m.Respond([]byte("jobs")) })
	require.NoError(t, err)
	require.NoError(t, co.Flush())
	r, err := acme.Request("fairway.api.acme.get", nil, time.Second)
	require.NoError(t, err)
	require.Equal(t, "hi fairway.api.acme.get", string(r.Data))
	_, err = acme.Request("fairway.api.globex.get", nil, 200*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
	_, err = acme.Request("fairway.admin.list", nil, 200*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)

	w1 := conn(natsauth.KindExecutor, "w1")
	_, err = w1.Subscribe("fairway.executor.w1.*", func(m *nats.Msg) { _ = m.Respond([]byte("pong")) })
	require.NoError(t, err)
	require.NoError(t, w1.Flush())
	pong, err := co.SubscribeSync("fairway.exec.w1.pong.N1")
	require.NoError(t, err)
	require.NoError(t, co.PublishMsg(&nats.Msg{Subject: "fairway.executor.w1.ping", Reply: "fairway.exec.w1.pong.N1"}))
	m, err := pong.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "pong", string(m.Data))
	// An executor's reports land in its own stream (as 'fairway creds add
	// executor' and its registration make it), none in the shared one.
	require.NoError(t, events.EnsureExecutorResultStream(ctx, cjs, events.NewSubjects(""), "w1", events.StreamOptions{}))
	wjs, err := jetstream.New(w1)
	require.NoError(t, err)
	ack, err = wjs.Publish(ctx, "fairway.results.w1", []byte(`[]`))
	require.NoError(t, err)
	require.Equal(t, "FAIRWAY_RESULTS_E_w1", ack.Stream)
	_, err = wjs.Publish(ctx, "fairway.results.w1", []byte(`[]`))
	require.NoError(t, err)
	f, err := wjs.PublishAsync("fairway.results.w1", []byte(`[]`))
	require.NoError(t, err)
	select {
	case <-f.Ok():
	case e := <-f.Err():
		t.Fatal(e)
	}
	_, err = wjs.Publish(ctx, "fairway.results.w2", []byte(`[]`))
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "an executor reported as another")
	_, err = w1.Request("fairway.exec.w2.dispatch", nil, 200*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// TestAccountLimitsAndRevocation: a tenant's account limits hold on a real
// server (a connection beyond its limit is refused, whoever else connects),
// and revoking its credentials closes the connections of those issued
// before, refuses them from then on, and leaves a credential issued after
// working.
func TestAccountLimitsAndRevocation(t *testing.T) {
	dir := t.TempDir()
	k, err := natsauth.Open(filepath.Join(dir, "keys"), "fairway", true)
	require.NoError(t, err)
	_, err = k.TenantAccountJWT("acme")
	require.NoError(t, err)
	require.True(t, k.HasAccount(natsauth.KindTenant, "acme"))
	require.False(t, k.HasAccount(natsauth.KindTenant, "initech"), "no such tenant")
	lim, err := k.Limits(natsauth.KindTenant, "acme")
	require.NoError(t, err)
	require.Equal(t, natsauth.TenantLimitsDefault, lim)
	lim.Connections = 2
	require.NoError(t, k.SetLimits(natsauth.KindTenant, "acme", lim))
	s, err := natsserver.Start(natsserver.Options{StoreDir: filepath.Join(dir, "js"), Port: -1, Accounts: k, ResolverDir: filepath.Join(dir, "jwt")})
	require.NoError(t, err)
	defer s.Shutdown()
	creds := func(kind, name, file string) string {
		p := filepath.Join(dir, file)
		require.NoError(t, k.WriteCreds(p, kind, name))
		return p
	}
	acme := creds(natsauth.KindTenant, "acme", "acme.creds")
	closed := make(chan struct{}, 2)
	for range 2 {
		nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(acme), nats.NoReconnect(),
			nats.ClosedHandler(func(*nats.Conn) { closed <- struct{}{} }))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
	}
	_, err = nats.Connect(s.ClientURL(), nats.UserCredentials(acme))
	require.ErrorContains(t, err, "maximum account active connections exceeded", "a third connection of acme")

	// Revoked: the servers close acme's connections and refuse its
	// credential.
	lim.RevokedBefore = time.Now().UTC().Truncate(time.Second)
	require.NoError(t, k.SetLimits(natsauth.KindTenant, "acme", lim))
	a, err := k.TenantAccountJWT("acme")
	require.NoError(t, err)
	sys, err := nats.Connect(s.ClientURL(), nats.UserCredentials(creds(natsauth.KindSystem, "system", "sys.creds")))
	require.NoError(t, err)
	defer sys.Close()
	require.NoError(t, natsauth.Push(sys, a))
	for range 2 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("a connection of a revoked credential stayed open")
		}
	}
	_, err = nats.Connect(s.ClientURL(), nats.UserCredentials(acme))
	require.Error(t, err, "a revoked credential connected")
	// A credential issued after the revocation's second works.
	time.Sleep(time.Until(lim.RevokedBefore.Add(time.Second))) // JWTs count whole seconds
	nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(creds(natsauth.KindTenant, "acme", "acme-new.creds")))
	require.NoError(t, err)
	nc.Close()
}
