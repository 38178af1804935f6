package cli

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/demo"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestTenantSubmitStreamsTakeEachTenantsBound: each tenant's submit stream
// gets the tenant's own --max-submit-bytes (the default for one without),
// and a bound JetStream cannot reserve is a final error that says what to
// do.
func TestTenantSubmitStreamsTakeEachTenantsBound(t *testing.T) {
	t.Parallel()
	nc := natstest.StartWithStore(t, 256<<20)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	k, err := natsauth.Open(t.TempDir(), "fairway", true)
	require.NoError(t, err)
	setSubmit := func(tenant string, n int64) {
		l, err := k.Limits(natsauth.KindTenant, tenant)
		require.NoError(t, err)
		l.SubmitBytes = n
		require.NoError(t, k.SetLimits(natsauth.KindTenant, tenant, l))
	}
	setSubmit("acme", 8<<20)
	setSubmit("globex", -1)
	opts := events.StreamOptions{TenantSubmitMaxBytes: 16 << 20} // the coordinators' default for tenants
	require.NoError(t, ensureTenantSubmitStreamsOf(t.Context(), nc, k, "fairway", opts, "acme", "globex", "initech"))
	for tenant, want := range map[string]int64{"acme": 8 << 20, "globex": -1, "initech": 16 << 20} {
		st, err := js.Stream(t.Context(), events.NewSubjects("fairway").TenantSubmitStream(tenant))
		require.NoError(t, err)
		require.Equal(t, want, st.CachedInfo().Config.MaxBytes, tenant)
	}

	// More than JetStream's 256 MiB.
	setSubmit("acme", 1<<30)
	err = ensureTenantSubmitStreamsOf(t.Context(), nc, k, "fairway", opts, "acme")
	require.Error(t, err)
	t.Log(err)
	require.True(t, events.IsStreamConfigRefused(err), "a final error: %v", err)
	require.ErrorContains(t, err, "tenant acme's submissions bound of 1GiB")
	require.ErrorContains(t, err, "lower it with 'fairway creds add tenant acme --max-submit-bytes SIZE' or give JetStream more storage")
	// Without the keyring, opts' bound.
	err = ensureTenantSubmitStreams(t.Context(), nc, "fairway", events.StreamOptions{TenantSubmitMaxBytes: 1 << 30}, "initech")
	require.ErrorContains(t, err, "tenant initech's submissions bound of 1GiB")
}

// TestDevExecutorIsNarrow: fairway dev --tenants issues its executor a
// credential for the demo tasks of the dev's tenants, recorded.
func TestDevExecutorIsNarrow(t *testing.T) {
	dir := t.TempDir()
	k, credsDir, err := devAccounts(dir, "fairway", []string{"acme", "globex"}, "dev-worker")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, credsDirName), credsDir)
	rec, err := k.IssuedRecords()
	require.NoError(t, err)
	require.Empty(t, rec.Before, "a new dev dir has no account older than the record")
	got := rec.Of(natsauth.KindExecutor, "dev-worker")
	require.Len(t, got, 1)
	g, err := got[0].Grant()
	require.NoError(t, err)
	require.Equal(t, events.Grant{Tasks: demo.Tasks(), Groups: []string{"acme", "globex"}}, g)
	require.True(t, slices.Contains(g.Tasks, "echo"))
	for _, kind := range []string{natsauth.KindTenant, natsauth.KindOperator, natsauth.KindCoordinator, natsauth.KindSystem} {
		require.True(t, slices.ContainsFunc(rec.Issued, func(i natsauth.Issued) bool { return i.Kind == kind }), kind)
	}

	// A tenant added since (creds add tenant) is the dev executor's too
	// from the next start.
	_, err = k.TenantAccountJWT("initech")
	require.NoError(t, err)
	k, _, err = devAccounts(dir, "fairway", []string{"acme", "globex"}, "dev-worker")
	require.NoError(t, err)
	rec, err = k.IssuedRecords()
	require.NoError(t, err)
	got = rec.Of(natsauth.KindExecutor, "dev-worker")
	require.Len(t, got, 2)
	g, err = got[1].Grant()
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "globex", "initech"}, g.Groups)
	require.False(t, rec.Unrecorded(natsauth.KindExecutor, "dev-worker", time.Time{}))
}
