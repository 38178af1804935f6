package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// credsKeys makes a keys directory with 'fairway creds init' and returns
// it.
func credsKeys(t *testing.T) string {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "keys")
	code, _, errOut := run(t, "creds", "init", "--keys", keys)
	require.Equal(t, 0, code, errOut)
	return keys
}

// TestCredsAddExecutorIsNarrowByDefault: an executor credential names
// its tasks and groups, or widens them by name; anything else is a usage
// error that writes nothing.
func TestCredsAddExecutorIsNarrowByDefault(t *testing.T) {
	keys := credsKeys(t)
	out := filepath.Join(t.TempDir(), "w.creds")
	add := func(args ...string) (int, string) {
		t.Helper()
		code, _, errOut := run(t, append([]string{"creds", "add", "--keys", keys, "--out", out, "--push=false"}, args...)...)
		return code, errOut
	}
	const want = "--tasks a,b or --any-task; --groups g1,g2 or --any-group"
	for _, args := range [][]string{
		{"executor", "w1"},
		{"executor", "w1", "--slots", "4"},
		{"executor", "w1", "--tasks", "echo"},
		{"executor", "w1", "--groups", "acme"},
		{"executor", "w1", "--any-task"},
		{"executor", "w1", "--any-group", "--slots", "2"},
		{"executor", "w1", "--any-task=false", "--any-group"},
	} {
		code, errOut := add(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, want, args)
		require.NoFileExists(t, out, args)
	}
	for _, args := range [][]string{
		{"executor", "w1", "--tasks", "echo", "--any-task", "--groups", "acme"},
		{"executor", "w1", "--tasks", "echo", "--groups", "acme", "--any-group"},
	} {
		code, errOut := add(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "give one or the other", args)
	}
	for _, args := range [][]string{
		{"tenant", "acme", "--any-task"},
		{"tenant", "acme", "--any-group"},
		{"operator", "--tasks", "echo"},
	} {
		code, errOut := add(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "not a ", args)
	}
	code, errOut := add("executor", "w1", "--max-submit-bytes", "1GiB", "--any-task", "--any-group")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--max-submit-bytes bounds a tenant's submissions, not a executor's")
	for _, bad := range []string{"lots", "-2", "2TiB"} {
		code, errOut := add("tenant", "acme", "--max-submit-bytes", bad)
		require.Equal(t, 2, code, "%s: %s", bad, errOut)
		require.Contains(t, errOut, "--max-submit-bytes")
	}
	require.NoFileExists(t, out)
	_, err := os.Stat(filepath.Join(keys, "account-TENANT_acme.limits.json"))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused command line kept limits")

	// Named, widened by name, or both.
	for _, c := range []struct {
		args []string
		may  string
	}{
		{[]string{"--tasks", "echo,sleep", "--groups", "acme"}, "tasks echo,sleep, groups acme, slots any number"},
		{[]string{"--tasks", "echo", "--any-group", "--slots", "3"}, "tasks echo, groups any, slots 3"},
		{[]string{"--any-task", "--groups", "acme"}, "tasks any, groups acme, slots any number"},
		{[]string{"--any-task", "--any-group"}, "tasks any, groups any, slots any number"},
	} {
		code, errOut := add(append([]string{"executor", "w1"}, c.args...)...)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, errOut, c.may)
		require.FileExists(t, out)
		require.NoError(t, os.Remove(out))
	}
}

// TestCredsList: the accounts with their limits, and each executor
// credential with what it may run: narrow, wide, revoked, expiring, and
// those issued before the keys directory kept a record.
func TestCredsList(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	// An executor and a tenant made before records were kept, as by an
	// older fairway.
	k, err := natsauth.Open(keys, "fairway", true)
	require.NoError(t, err)
	_, err = k.ExecutorAccountJWT("old")
	require.NoError(t, err)
	require.NoError(t, k.WriteCreds(filepath.Join(t.TempDir(), "old.creds"), natsauth.KindExecutor, "old"))
	_, err = k.TenantAccountJWT("legacy")
	require.NoError(t, err)

	dir := t.TempDir()
	add := func(args ...string) {
		t.Helper()
		out := filepath.Join(dir, strings.Join(args[:2], "-")+fmt.Sprint(time.Now().UnixNano())+".creds")
		code, _, errOut := run(t, append([]string{"creds", "add", "--keys", keys, "--out", out, "--push=false"}, args...)...)
		require.Equal(t, 0, code, errOut)
	}
	add("executor", "mailer", "--tasks", "send-mail,poll-mail", "--groups", "acme,globex", "--slots", "8")
	add("executor", "mailer", "--tasks", "send-mail,poll-mail", "--groups", "acme,globex", "--slots", "8")
	add("executor", "wide", "--any-task", "--any-group")
	add("executor", "temp", "--tasks", "export", "--any-group", "--expires", "1h")
	add("executor", "none", "--tasks", "", "--groups", "acme")
	add("tenant", "acme", "--max-submit-bytes", "256MiB", "--max-connections", "1000")
	add("tenant", "globex", "--max-submit-bytes", "-1", "--max-payload", "1048576")
	add("tenant", "initech")

	// "wide"'s credentials revoked (as creds revoke does, without a server).
	l, err := k.Limits(natsauth.KindExecutor, "wide")
	require.NoError(t, err)
	l.RevokedBefore = time.Now().Add(time.Second).UTC().Truncate(time.Second)
	require.NoError(t, k.SetLimits(natsauth.KindExecutor, "wide", l))

	code, out, errOut := run(t, "creds", "list", "--keys", keys)
	require.Equal(t, 0, code, errOut)
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	row := func(fields ...string) {
		t.Helper()
		re := regexp.MustCompile(`^` + strings.Join(quoteAll(fields), `\s{2,}`) + `\s*$`)
		for _, l := range lines {
			if re.MatchString(l) {
				return
			}
		}
		t.Fatalf("no line %q in\n%s", fields, out)
	}
	row("TENANT", "CONNECTIONS", "SUBSCRIPTIONS", "PAYLOAD", "SUBMIT BYTES", "CREDENTIALS", "REVOKED BEFORE")
	row("acme", "1000", "10000", "8MiB", "256MiB", "1 valid", "-")
	row("globex", "256", "10000", "1MiB", "unlimited", "1 valid", "-")
	defaultSubmit := "unlimited (default)"
	if events.TenantSubmitMaxBytesDefault > 0 {
		defaultSubmit = fmt.Sprintf("%dMiB (default)", events.TenantSubmitMaxBytesDefault>>20)
	}
	row("initech", "256", "10000", "8MiB", defaultSubmit, "1 valid", "-")
	row("legacy", "256", "10000", "8MiB", defaultSubmit, "earlier ones unrecorded", "-")

	row("EXECUTOR", "CONNECTIONS", "SUBSCRIPTIONS", "PAYLOAD", "CREDENTIALS", "REVOKED BEFORE")
	row("mailer", "16", "1000", "8MiB", "2 valid", "-")
	row("old", "16", "1000", "8MiB", "earlier ones unrecorded", "-")
	row("wide", "16", "1000", "8MiB", "1 revoked", l.RevokedBefore.Format(time.RFC3339))

	row("EXECUTOR", "CREDENTIALS", "LAST ISSUED", "MAY RUN", "STATE")
	issued := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	rowRe := func(fields ...string) {
		t.Helper()
		re := regexp.MustCompile(`^` + strings.Join(fields, `\s{2,}`) + `\s*$`)
		for _, l := range lines {
			if re.MatchString(l) {
				return
			}
		}
		t.Fatalf("no line matching %q in\n%s", fields, out)
	}
	rowRe("mailer", "2", issued, regexp.QuoteMeta("tasks send-mail,poll-mail; groups acme,globex, at most 8 slots"), "valid")
	rowRe("wide", "1", issued, regexp.QuoteMeta("any task, any group (wide)"), "revoked")
	rowRe("temp", "1", issued, regexp.QuoteMeta("tasks export; any group"), "valid until "+issued)
	rowRe("none", "1", issued, regexp.QuoteMeta("no task; groups acme"), "valid")
	row("old", "?", "before records were kept", "may be wide (any task, any group)", "unrecorded")
	require.Contains(t, out, "executor old: credentials issued before records were kept: may be wide (any task, any group); revoke with 'fairway creds revoke executor old' and issue narrow ones")
	require.NotContains(t, out, "executor mailer: credentials issued before")

	// The tenant's bound is kept: a later creds add tenant keeps it.
	add("tenant", "acme")
	l, err = k.Limits(natsauth.KindTenant, "acme")
	require.NoError(t, err)
	require.Equal(t, int64(256<<20), l.SubmitBytes)
	add("tenant", "acme", "--max-submit-bytes", "0")
	l, err = k.Limits(natsauth.KindTenant, "acme")
	require.NoError(t, err)
	require.Zero(t, l.SubmitBytes, "0: back to the default")
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = regexp.QuoteMeta(v)
	}
	return q
}

// TestCredsAddTenantMaxSubmitBytes: --max-submit-bytes reaches the
// tenant's submit stream on a real server in operator mode, is kept for
// the tenant, and goes back to the default with 0.
func TestCredsAddTenantMaxSubmitBytes(t *testing.T) {
	keys := credsKeys(t)
	k, err := natsauth.Open(keys, "fairway", false)
	require.NoError(t, err)
	dir := t.TempDir()
	s, err := natsserver.Start(natsserver.Options{StoreDir: filepath.Join(dir, "js"), Port: -1, Accounts: k, ResolverDir: filepath.Join(dir, "jwt")})
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(filepath.Join(keys, "coordinator.creds")))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	maxBytes := func() int64 {
		t.Helper()
		st, err := js.Stream(t.Context(), events.NewSubjects("").TenantSubmitStream("acme"))
		require.NoError(t, err)
		return st.CachedInfo().Config.MaxBytes
	}
	add := func(args ...string) {
		t.Helper()
		code, _, errOut := run(t, append([]string{"creds", "add", "tenant", "acme", "--keys", keys, "--out", filepath.Join(dir, "acme.creds"),
			"--nats-url", s.ClientURL(), "--dev-dir", dir}, args...)...)
		require.Equal(t, 0, code, errOut)
	}
	add("--max-submit-bytes", "32MiB")
	require.Equal(t, int64(32<<20), maxBytes())
	add() // kept for the tenant
	require.Equal(t, int64(32<<20), maxBytes())
	add("--max-submit-bytes", "-1")
	require.Equal(t, int64(-1), maxBytes())
	add("--max-submit-bytes", "0")
	require.Equal(t, int64(events.TenantSubmitMaxBytesDefault), maxBytes())
}
