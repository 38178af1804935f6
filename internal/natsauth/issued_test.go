package natsauth_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/stretchr/testify/require"
)

// TestIssuedRecords: the keyring records each credential IssueCreds
// writes (0600, appended), with its grant as issued; accounts that existed
// before the record began are flagged until their credentials are all
// revoked.
func TestIssuedRecords(t *testing.T) {
	dir := t.TempDir()
	k, err := natsauth.Open(filepath.Join(dir, "keys"), "fairway", true)
	require.NoError(t, err)
	rec, err := k.IssuedRecords()
	require.NoError(t, err)
	require.True(t, rec.Began.IsZero(), "a new keyring keeps no record until it issues")
	require.True(t, rec.Unrecorded(natsauth.KindExecutor, "old", time.Time{}), "without a record, every account may hold unrecorded credentials")

	// An executor made before the record began.
	_, err = k.ExecutorAccountJWT("old")
	require.NoError(t, err)
	require.NoError(t, k.WriteCreds(filepath.Join(dir, "old.creds"), natsauth.KindExecutor, "old"))
	require.NoError(t, k.BeginRecords())
	names, err := k.AccountNames(natsauth.KindExecutor)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, names)

	_, err = k.ExecutorAccountJWT("narrow")
	require.NoError(t, err)
	narrow := events.Grant{Tasks: []string{"echo"}, Groups: []string{}, Slots: 3}
	i, err := k.IssueCreds(filepath.Join(dir, "narrow.creds"), natsauth.KindExecutor, "narrow", natsauth.User{Grant: narrow, Expires: time.Hour})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "narrow.creds"))
	require.NotEmpty(t, i.User)
	require.WithinDuration(t, time.Now(), i.Time, 2*time.Second)
	require.WithinDuration(t, time.Now().Add(time.Hour), i.Expires, 2*time.Second)
	_, err = k.IssueCreds(filepath.Join(dir, "wide.creds"), natsauth.KindExecutor, "narrow", natsauth.User{})
	require.NoError(t, err)
	_, err = k.IssueCreds(filepath.Join(dir, "op.creds"), natsauth.KindOperator, "operator", natsauth.User{})
	require.NoError(t, err)
	// A refused credential is neither recorded nor written.
	_, err = k.IssueCreds(filepath.Join(dir, "bad.creds"), natsauth.KindTenant, "acme", natsauth.User{Grant: narrow})
	require.Error(t, err)
	require.NoFileExists(t, filepath.Join(dir, "bad.creds"))

	info, err := os.Stat(filepath.Join(k.Dir(), "issued.jsonl"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	rec, err = k.IssuedRecords()
	require.NoError(t, err)
	require.False(t, rec.Began.IsZero())
	require.Equal(t, []string{"EXECUTOR_old"}, rec.Before)
	require.Len(t, rec.Issued, 3)
	got := rec.Of(natsauth.KindExecutor, "narrow")
	require.Len(t, got, 2)
	g, err := got[0].Grant()
	require.NoError(t, err)
	require.Equal(t, narrow, g, "an empty list (no group) stays distinct from any group")
	g, err = got[1].Grant()
	require.NoError(t, err)
	require.Equal(t, events.Grant{}, g)

	require.True(t, rec.Unrecorded(natsauth.KindExecutor, "old", time.Time{}))
	require.False(t, rec.Unrecorded(natsauth.KindExecutor, "narrow", time.Time{}), "made after the record began")
	// Revoked before the record began: some may have been issued since.
	require.True(t, rec.Unrecorded(natsauth.KindExecutor, "old", rec.Began.Add(-time.Hour).Truncate(time.Second)))
	// Revoked since: every earlier credential is refused.
	require.False(t, rec.Unrecorded(natsauth.KindExecutor, "old", rec.Began.Truncate(time.Second)))
	require.True(t, got[0].RevokedBy(got[0].Time))
	require.False(t, got[0].RevokedBy(got[0].Time.Add(-time.Second)))
	require.False(t, got[0].RevokedBy(time.Time{}))

	// Beginning again keeps the record.
	require.NoError(t, k.BeginRecords())
	again, err := k.IssuedRecords()
	require.NoError(t, err)
	require.Equal(t, rec, again)
}

// TestSubmitBytesLimit: a tenant's submit bound is kept with its limits,
// not in its JWT, and an executor has none.
func TestSubmitBytesLimit(t *testing.T) {
	k, err := natsauth.Open(t.TempDir(), "fairway", true)
	require.NoError(t, err)
	l, err := k.Limits(natsauth.KindTenant, "acme")
	require.NoError(t, err)
	require.Zero(t, l.SubmitBytes, "the default")
	l.SubmitBytes = 256 << 20
	require.NoError(t, k.SetLimits(natsauth.KindTenant, "acme", l))
	got, err := k.Limits(natsauth.KindTenant, "acme")
	require.NoError(t, err)
	require.Equal(t, l, got)
	_, err = k.TenantAccountJWT("acme")
	require.NoError(t, err)

	x, err := k.Limits(natsauth.KindExecutor, "w1")
	require.NoError(t, err)
	x.SubmitBytes = 1 << 20
	require.ErrorContains(t, k.SetLimits(natsauth.KindExecutor, "w1", x), "only a tenant")
}
