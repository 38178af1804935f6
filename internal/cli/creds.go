package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/demo"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The files of operator mode under the dev dir (or beside --keys).
const (
	keysDirName     = "nats-keys" // seeds; 0700
	resolverDirName = "nats-jwt"  // the embedded server's account JWTs
	credsDirName    = "creds"     // .creds files handed out; 0700
	systemCredsName = "system.creds"
)

func newCredsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "creds",
		Short: "Provision NATS credentials for tenants, executors and operators (operator mode)",
		Long: `Fairway isolates tenants with NATS accounts: each tenant (group) and each
executor is an account of its own under one operator, and its credential is a
standard NATS .creds file that works with any NATS client as it is.

Development: 'fairway dev --tenants acme,globex' creates the keys in
<dev-dir>/nats-keys and writes <dev-dir>/creds/tenant-<group>.creds,
operator.creds and the dev executor's credential. Against that running dev:

  fairway creds add executor worker-2 --tasks echo,sleep --groups acme   # <dev-dir>/creds/executor-worker-2.creds
  fairway creds add tenant initech         # <dev-dir>/creds/tenant-initech.creds
  fairway creds list                       # the accounts, and what each executor credential may run

Production: create the keys once, give the NATS servers their configuration,
then add tenants and executors (pushed to the running servers):

  fairway creds init --keys /etc/fairway/nats-keys
  fairway creds server-config --keys /etc/fairway/nats-keys --resolver-dir /var/lib/nats/jwt > accounts.conf
  fairway creds add tenant acme --keys /etc/fairway/nats-keys --out acme.creds --nats-url nats://nats-1:4222

Keep the keys directory secret: whoever holds it can sign any credential.`,
	}
	var keysDir string
	cmd.PersistentFlags().StringVar(&keysDir, "keys", "", "directory of the operator and account keys (default <dev-dir>/nats-keys)")
	keys := func() string {
		if keysDir != "" {
			return keysDir
		}
		return filepath.Join(e.cfg.Dev.Dir, keysDirName)
	}

	initCmd := e.withConfig(&cobra.Command{
		Use:   "init",
		Short: "Create the operator, system and FAIRWAY account keys, and the system, operator and coordinator credentials",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			k, err := natsauth.Open(keys(), e.cfg.NATS.Prefix, true)
			if err != nil {
				return err
			}
			for _, kind := range []string{natsauth.KindSystem, natsauth.KindOperator, natsauth.KindCoordinator} {
				path := filepath.Join(k.Dir(), kind+".creds")
				if _, err := k.IssueCreds(path, kind, kind, natsauth.User{}); err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, path)
			}
			return nil
		},
	}, "dev.dir", "nats.prefix")

	var out string
	var push bool
	var expires time.Duration
	var lim natsauth.Limits
	var grantTasks, grantGroups []string
	var grantSlots int
	var anyTask, anyGroup bool
	var submitBytes string
	addCmd := e.withConfig(&cobra.Command{
		Use:   "add tenant|executor|operator|coordinator [NAME]",
		Short: "Issue a credential: a tenant (NAME is its group), an executor (NAME is its app-id), an operator or a coordinator",
		Long: `Issue a credential and write it as a .creds file (0600), by default to
<dev-dir>/creds/<kind>-<NAME>.creds (operator.creds, coordinator.creds).

A new tenant or executor is a new NATS account: unless --push=false, its
account JWT is pushed to the NATS server at --nats-url with the system
credential in the keys directory, and a new tenant's stream of its own events
and its stream of submissions are created there (the tenant's own duplicate
window and backlog). With --push=false, give the servers the new account with
'fairway creds server-config' instead, then run this command again with
--push to create the tenant's streams.

An executor credential states what its holder may run: --tasks (the tasks
it may register and get jobs of) or --any-task, and --groups (only these
groups' jobs: a tenant's own executors) or --any-group; one of each is
required, so that the widest credential is asked for by name. --slots
caps the slots it may register (default: any number). The coordinators
enforce them on its registration and on every request for jobs. The
statement is signed into the credential: issue a new one to change it, and
revoke the old ones (creds revoke executor NAME). 'fairway creds list'
shows what each credential issued may run.

A tenant's submissions waiting in NATS (its own submit stream) are bounded
by --max-submit-bytes (default %s; kept for the tenant, and applied to its
stream now and by every later creds add tenant; -1: unlimited, 0: back to
the default).`,
		Example: `  fairway creds add tenant acme --max-submit-bytes 256MiB
  fairway creds add executor mailer --tasks send-mail,poll-mail --any-group --slots 8
  fairway creds add executor acme-own --tasks export --groups acme --expires 720h
  fairway creds add executor trusted --any-task --any-group     # the widest: any task of any group`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := args[0], ""
			if len(args) == 2 {
				name = args[1]
			}
			f := cmd.Flags()
			set := func(flag string, v int64, field *int64) {
				if f.Changed(flag) {
					*field = v
				}
			}
			// The command line is checked before anything is kept.
			if err := needName(kind, name); err != nil {
				return err
			}
			user := natsauth.User{Expires: expires}
			grant, err := executorGrant(f, kind, grantTasks, grantGroups, grantSlots, anyTask, anyGroup)
			if err != nil {
				return usageError{err}
			}
			user.Grant = grant
			var submit int64
			if f.Changed("max-submit-bytes") {
				if kind != natsauth.KindTenant {
					return usageError{fmt.Errorf("--max-submit-bytes bounds a tenant's submissions, not a %s's", kind)}
				}
				if submit, err = parseSubmitBytes(submitBytes); err != nil {
					return usageError{fmt.Errorf("--max-submit-bytes %q: %w", submitBytes, err)}
				}
			}
			if f.Changed("max-connections") || f.Changed("max-subscriptions") || f.Changed("max-payload") || f.Changed("max-submit-bytes") {
				if name == "" {
					return usageError{fmt.Errorf("limits are set for a tenant's or an executor's account: name it (creds add %s NAME --max-…)", kind)}
				}
				cur, err := natsauth.Open(keys(), e.cfg.NATS.Prefix, false)
				if err != nil {
					return err
				}
				l, err := cur.Limits(kind, name)
				if err != nil {
					return usageError{err}
				}
				set("max-connections", lim.Connections, &l.Connections)
				set("max-subscriptions", lim.Subscriptions, &l.Subscriptions)
				set("max-payload", lim.Payload, &l.Payload)
				set("max-submit-bytes", submit, &l.SubmitBytes)
				if err := cur.SetLimits(kind, name, l); err != nil {
					return usageError{err}
				}
			}
			return e.addCreds(cmd.Context(), keys(), kind, name, out, push, user)
		},
	}, "dev.dir", "nats.url", "nats.prefix")
	addCmd.Flags().StringVar(&out, "out", "", "file to write the credential to (default <dev-dir>/creds/<kind>-<NAME>.creds)")
	addCmd.Flags().BoolVar(&push, "push", true, "push a new account to the NATS server at --nats-url")
	addCmd.Flags().DurationVar(&expires, "expires", 0, "the credential expires after this long (e.g. 720h; 0: never)")
	addCmd.Long = fmt.Sprintf(addCmd.Long, submitBytesText(0))
	addCmd.Flags().StringSliceVar(&grantTasks, "tasks", nil, "an executor credential may register and run only these tasks (or --any-task)")
	addCmd.Flags().StringSliceVar(&grantGroups, "groups", nil, "an executor credential gets only these groups' jobs (or --any-group)")
	addCmd.Flags().BoolVar(&anyTask, "any-task", false, "an executor credential may register and run any task")
	addCmd.Flags().BoolVar(&anyGroup, "any-group", false, "an executor credential gets the jobs of any group")
	addCmd.Flags().IntVar(&grantSlots, "slots", 0, "an executor credential may register at most this many slots (default 0: any number)")
	addCmd.Flags().StringVar(&submitBytes, "max-submit-bytes", "", fmt.Sprintf("a tenant's submissions waiting in NATS, in bytes (e.g. 64MiB, 1GiB; default %s; -1: unlimited, 0: the default); kept for the tenant",
		submitBytesText(0)))
	addCmd.Flags().Int64Var(&lim.Connections, "max-connections", 0, fmt.Sprintf("a tenant's or executor's connections at once (default %d for a tenant, %d for an executor; -1: unlimited); kept for the account",
		natsauth.TenantLimitsDefault.Connections, natsauth.ExecutorLimitsDefault.Connections))
	addCmd.Flags().Int64Var(&lim.Subscriptions, "max-subscriptions", 0, fmt.Sprintf("its subscriptions, all connections together (default %d for a tenant, %d for an executor; -1: unlimited)",
		natsauth.TenantLimitsDefault.Subscriptions, natsauth.ExecutorLimitsDefault.Subscriptions))
	addCmd.Flags().Int64Var(&lim.Payload, "max-payload", 0, fmt.Sprintf("its largest message in bytes (default %d; -1: unlimited)", natsauth.TenantLimitsDefault.Payload))

	revokeCmd := e.withConfig(&cobra.Command{
		Use:   "revoke tenant|executor NAME",
		Short: "Take every credential issued so far for a tenant or an executor away from the running cluster",
		Long: `Revoke every credential of a tenant's or an executor's account issued until
now: the account is signed again with the revocation and pushed to the NATS
server at --nats-url (as creds add does), which closes the connections of
those credentials and refuses them from then on. Credentials issued from the
next second on work: give the tenant or executor a new one with 'fairway
creds add'.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.revokeCreds(cmd.Context(), keys(), args[0], args[1])
		},
	}, "dev.dir", "nats.url", "nats.prefix")

	var resolverDir string
	serverCmd := e.withConfig(&cobra.Command{
		Use:   "server-config",
		Short: "Print the nats-server configuration that trusts these keys (operator, system account, resolver, accounts)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			k, err := natsauth.Open(keys(), e.cfg.NATS.Prefix, false)
			if err != nil {
				return err
			}
			conf, err := k.ServerConfig(resolverDir)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, conf)
			return err
		},
	}, "dev.dir", "nats.prefix")
	serverCmd.Flags().StringVar(&resolverDir, "resolver-dir", "./jwt", "where the NATS server stores account JWTs")

	listCmd := e.withConfig(&cobra.Command{
		Use:   "list",
		Short: "List the tenant and executor accounts with their limits, and the executor credentials issued with what each may run",
		Long: `List the accounts of the keys directory: each tenant with its limits
(connections, subscriptions, largest message, submissions waiting in NATS)
and each executor with its limits, then every executor credential issued,
with what it may run (tasks, groups, slots; "any task, any group (wide)"),
when it was issued and whether it is revoked or expired. Credentials issued
the same way are counted on one line.

The keys directory keeps a record of the credentials issued from this
version on (issued.jsonl): an account whose earlier credentials are not all
revoked is flagged, since they may be wide.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			k, err := natsauth.Open(keys(), e.cfg.NATS.Prefix, false)
			if err != nil {
				return err
			}
			return listCreds(e.stdout, k, time.Now())
		},
	}, "dev.dir", "nats.prefix")

	cmd.AddCommand(initCmd, addCmd, listCmd, revokeCmd, serverCmd)
	return cmd
}

// revokeCreds revokes every credential of an account issued until now, and
// pushes the account.
func (e *env) revokeCreds(ctx context.Context, keysDir, kind, name string) error {
	k, err := natsauth.Open(keysDir, e.cfg.NATS.Prefix, false)
	if err != nil {
		return err
	}
	if !k.HasAccount(kind, name) {
		return usageError{fmt.Errorf("no %s account %q in %s: nothing to revoke (kinds: tenant, executor)", kind, name, keysDir)}
	}
	l, err := k.Limits(kind, name)
	if err != nil {
		return usageError{err}
	}
	l.RevokedBefore = time.Now().UTC().Truncate(time.Second)
	if err := k.SetLimits(kind, name, l); err != nil {
		return err
	}
	a, err := k.AccountJWT(kind, name)
	if err != nil {
		return err
	}
	// Pushed only: the tenant's streams exist, and a credential issued now
	// (this second) would be revoked too.
	if err := e.pushOnly(k, a); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "revoked every credential of %s %s issued until %s; issue a new one with: fairway creds add %s %s\n",
		kind, name, l.RevokedBefore.Format(time.RFC3339), kind, name)
	return nil
}

// needName refuses creds add tenant or executor without a NAME.
func needName(kind, name string) error {
	if name == "" && (kind == natsauth.KindTenant || kind == natsauth.KindExecutor) {
		return usageError{fmt.Errorf("creds add %s needs a NAME (the %s)", kind, map[string]string{natsauth.KindTenant: "group", natsauth.KindExecutor: "app-id"}[kind])}
	}
	return nil
}

// executorGrant reads what an executor credential may run from the
// command line: each of tasks and groups named or widened (--any-task,
// --any-group), so that a wide credential is asked for by name.
func executorGrant(f *pflag.FlagSet, kind string, tasks, groups []string, slots int, anyTask, anyGroup bool) (events.Grant, error) {
	if kind != natsauth.KindExecutor {
		for _, flag := range []string{"tasks", "groups", "slots", "any-task", "any-group"} {
			if f.Changed(flag) {
				return events.Grant{}, fmt.Errorf("--tasks, --groups, --any-task, --any-group and --slots state what an executor credential may run, not a %s's", kind)
			}
		}
		return events.Grant{}, nil
	}
	for _, both := range [][2]string{{"tasks", "any-task"}, {"groups", "any-group"}} {
		if f.Changed(both[0]) && f.Changed(both[1]) {
			return events.Grant{}, fmt.Errorf("--%s and --%s: give one or the other", both[0], both[1])
		}
	}
	namedTasks, namedGroups := f.Changed("tasks") || anyTask, f.Changed("groups") || anyGroup
	if !namedTasks || !namedGroups {
		return events.Grant{}, errors.New("an executor credential states what it may run: --tasks a,b or --any-task; --groups g1,g2 or --any-group")
	}
	g := events.Grant{Slots: slots}
	if !anyTask {
		g.Tasks = nonNil(tasks)
	}
	if !anyGroup {
		g.Groups = nonNil(groups)
	}
	return g, nil
}

// parseSubmitBytes reads --max-submit-bytes: a stream size, -1
// (unlimited) or 0 (the default).
func parseSubmitBytes(s string) (int64, error) {
	switch strings.TrimSpace(s) {
	case "-1":
		return -1, nil
	case "0":
		return 0, nil
	}
	return config.ParseStreamSize(s)
}

// submitBytesText says what a tenant's submit bound (Limits.SubmitBytes)
// is: 0 is the default, negative unlimited.
func submitBytesText(n int64) string {
	if n == 0 {
		n = events.TenantSubmitMaxBytesDefault
	}
	if n <= 0 {
		return "unlimited"
	}
	return config.FormatByteSize(n)
}

// addCreds issues one credential, pushing a new account first.
func (e *env) addCreds(ctx context.Context, keysDir, kind, name, out string, push bool, user natsauth.User) error {
	k, err := natsauth.Open(keysDir, e.cfg.NATS.Prefix, false)
	if err != nil {
		return err
	}
	if err := k.BeginRecords(); err != nil { // before the account, if new, is made
		return err
	}
	var account *natsauth.Account
	switch kind {
	case natsauth.KindTenant, natsauth.KindExecutor:
		if err := needName(kind, name); err != nil {
			return err
		}
		a, err := k.AccountJWT(kind, name)
		if err != nil {
			return err
		}
		account = &a
	case natsauth.KindOperator, natsauth.KindCoordinator, natsauth.KindSystem:
		name = kind
	default:
		return usageError{fmt.Errorf("unknown kind %q: use tenant, executor, operator or coordinator", kind)}
	}
	if out == "" {
		file := kind + ".creds"
		if account != nil {
			file = kind + "-" + name + ".creds"
		}
		out = filepath.Join(e.cfg.Dev.Dir, credsDirName, file)
	}
	if account != nil && push {
		if err := e.pushAccount(ctx, k, *account, kind, name); err != nil {
			return err
		}
	}
	if _, err := k.IssueCreds(out, kind, name, user); err != nil {
		return usageError{err}
	}
	fmt.Fprintln(e.stdout, out)
	if kind == natsauth.KindExecutor {
		e.log.Info("executor credential issued", "app_id", name, "may_run", user.Grant.String())
	}
	return nil
}

// nonNil keeps an empty list given on the command line (--tasks "")
// distinct from none given: it allows nothing.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// pushOnly sends an account to the server at nats.url with the system
// credential.
func (e *env) pushOnly(k *natsauth.Keyring, a natsauth.Account) error {
	sys := filepath.Join(k.Dir(), systemCredsName)
	if _, err := os.Stat(sys); err != nil {
		return fmt.Errorf("pushing account %s needs the system credential %s: %w (run 'fairway creds init', or pass --push=false)", a.Name, sys, err)
	}
	nc, err := natsconn.Connect(e.asUser(sys), nats.Name("fairway-creds"))
	if err != nil {
		return fmt.Errorf("pushing account %s: %w (is the server running? or pass --push=false)", a.Name, err)
	}
	defer nc.Close()
	if err := natsauth.Push(nc, a); err != nil {
		return err
	}
	e.log.Info("account pushed", "account", a.Name, "public_key", a.PublicKey)
	return nil
}

// pushAccount sends a new account to the server at nats.url, and creates a
// tenant's own event stream in it.
func (e *env) pushAccount(ctx context.Context, k *natsauth.Keyring, a natsauth.Account, kind, name string) error {
	if err := e.pushOnly(k, a); err != nil {
		return err
	}
	if kind == natsauth.KindExecutor {
		return e.ensureExecutorResultStream(ctx, k, name)
	}
	if kind != natsauth.KindTenant {
		return nil
	}
	creds, err := os.CreateTemp("", "fairway-tenant-*.creds")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(creds.Name()) }() // a temporary file in the temporary directory: left there if this fails
	_ = creds.Close()
	if err := k.WriteCreds(creds.Name(), kind, name); err != nil {
		return err
	}
	tnc, err := natsconn.Connect(e.asUser(creds.Name()), nats.Name("fairway-creds"))
	if err != nil {
		return fmt.Errorf("connecting as tenant %s: %w", name, err)
	}
	defer tnc.Close()
	if err := ensureTenantStream(ctx, tnc, e.cfg.NATS.Prefix); err != nil {
		return err
	}
	// The tenant's submit stream lives in the coordinators' account.
	if err := k.WriteCreds(creds.Name(), natsauth.KindCoordinator, "coordinator"); err != nil {
		return err
	}
	fnc, err := natsconn.Connect(e.asUser(creds.Name()), nats.Name("fairway-creds"))
	if err != nil {
		return fmt.Errorf("connecting to create tenant %s's submit stream: %w", name, err)
	}
	defer fnc.Close()
	return ensureTenantSubmitStreamsOf(ctx, fnc, k, e.cfg.NATS.Prefix, e.streamOptions(), name)
}

// ensureExecutorResultStream creates the stream of an executor's reports
// (events.EnsureExecutorResultStream) in the coordinators' account, through
// a connection of theirs: the executor's reports arrive there (the
// coordinators also make it when the executor registers).
func (e *env) ensureExecutorResultStream(ctx context.Context, k *natsauth.Keyring, appID string) error {
	creds, err := os.CreateTemp("", "fairway-coordinator-*.creds")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(creds.Name()) }() // a temporary file in the temporary directory: left there if this fails
	_ = creds.Close()
	if err := k.WriteCreds(creds.Name(), natsauth.KindCoordinator, "coordinator"); err != nil {
		return err
	}
	fnc, err := natsconn.Connect(e.asUser(creds.Name()), nats.Name("fairway-creds"))
	if err != nil {
		return fmt.Errorf("connecting to create executor %s's results stream: %w", appID, err)
	}
	defer fnc.Close()
	js, err := jetstream.New(fnc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return events.EnsureExecutorResultStream(ctx, js, events.NewSubjects(e.cfg.NATS.Prefix), appID, e.streamOptions())
}

// ensureTenantSubmitStreams creates each tenant's own submit stream
// (events.EnsureTenantSubmitStream) through a connection of the
// coordinators' account, bounded by opts.TenantSubmitMaxBytes.
// ensureTenantSubmitStreamsOf bounds each by the tenant's own
// --max-submit-bytes.
func ensureTenantSubmitStreams(ctx context.Context, nc *nats.Conn, prefix string, opts events.StreamOptions, tenants ...string) error {
	return ensureTenantSubmitStreamsOf(ctx, nc, nil, prefix, opts, tenants...)
}

// ensureTenantSubmitStreamsOf is ensureTenantSubmitStreams with each
// tenant's stream bounded by its own submit bytes (Limits.SubmitBytes,
// from fairway creds add tenant --max-submit-bytes) in k, when k is not
// nil; opts.TenantSubmitMaxBytes when it has none.
func ensureTenantSubmitStreamsOf(ctx context.Context, nc *nats.Conn, k *natsauth.Keyring, prefix string, opts events.StreamOptions, tenants ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, t := range tenants {
		o := opts
		if k != nil {
			l, err := k.Limits(natsauth.KindTenant, t)
			if err != nil {
				return err
			}
			if l.SubmitBytes != 0 {
				o.TenantSubmitMaxBytes = l.SubmitBytes
			}
		}
		if err := events.EnsureTenantSubmitStream(ctx, js, events.NewSubjects(prefix), t, o); err != nil {
			if events.IsStreamConfigRefused(err) {
				return fmt.Errorf("%w: JetStream cannot reserve tenant %s's submissions bound of %s; lower it with 'fairway creds add tenant %s --max-submit-bytes SIZE' or give JetStream more storage",
					err, t, submitBytesText(o.TenantSubmitMaxBytes), t)
			}
			return err
		}
	}
	return nil
}

// asUser is the NATS configuration with credentials replaced by the creds
// file at path (TLS settings kept).
func (e *env) asUser(path string) config.NATSConfig {
	c := e.cfg.NATS
	c.Creds, c.NKey, c.User, c.Password, c.Token = path, "", "", "", ""
	return c
}

// ensureTenantStream creates a tenant's event stream through its own
// connection.
func ensureTenantStream(ctx context.Context, nc *nats.Conn, prefix string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return events.EnsureTenantStream(ctx, js, events.NewSubjects(prefix), 0, 0)
}

// devAccounts prepares operator mode for fairway dev: the keys, one account
// and credential per tenant, the dev executor's account and credential,
// and the operator, coordinator and system credentials. It returns the
// keyring and the credentials directory.
func devAccounts(devDir, prefix string, tenants []string, executorAppID string) (*natsauth.Keyring, string, error) {
	k, err := natsauth.Open(filepath.Join(devDir, keysDirName), prefix, true)
	if err != nil {
		return nil, "", err
	}
	if err := k.BeginRecords(); err != nil { // before the accounts, if new, are made
		return nil, "", err
	}
	creds := filepath.Join(devDir, credsDirName)
	if err := os.MkdirAll(creds, 0o700); err != nil {
		return nil, "", err
	}
	write := func(path, kind, name string, u natsauth.User) error {
		_, err := k.IssueCreds(path, kind, name, u)
		return err
	}
	var errs []error
	for _, t := range tenants {
		if _, err := k.TenantAccountJWT(t); err != nil {
			return nil, "", err
		}
		errs = append(errs, write(filepath.Join(creds, "tenant-"+t+".creds"), natsauth.KindTenant, t, natsauth.User{}))
	}
	if _, err := k.ExecutorAccountJWT(executorAppID); err != nil {
		return nil, "", fmt.Errorf("the dev executor's app-id: %w", err)
	}
	grant, err := devExecutorGrant(k)
	if err != nil {
		return nil, "", err
	}
	errs = append(errs,
		write(filepath.Join(creds, "executor-"+executorAppID+".creds"), natsauth.KindExecutor, executorAppID, natsauth.User{Grant: grant}),
		write(filepath.Join(creds, "operator.creds"), natsauth.KindOperator, "operator", natsauth.User{}),
		write(filepath.Join(creds, "coordinator.creds"), natsauth.KindCoordinator, "coordinator", natsauth.User{}),
		write(filepath.Join(k.Dir(), systemCredsName), natsauth.KindSystem, "system", natsauth.User{}),
	)
	return k, creds, errors.Join(errs...)
}

// devExecutorGrant is what fairway dev's own executor may run: the demo
// tasks (what it registers), of the dev's tenants: every tenant account in
// the keys directory (the --tenants made just before, and those added with
// creds add tenant since), so a narrow credential, as creds add executor
// issues by default.
func devExecutorGrant(k *natsauth.Keyring) (events.Grant, error) {
	groups, err := k.AccountNames(natsauth.KindTenant)
	if err != nil {
		return events.Grant{}, err
	}
	return events.Grant{Tasks: demo.Tasks(), Groups: nonNil(groups)}, nil
}

// listCreds prints the tenant and executor accounts of k with their
// limits, then the executor credentials issued with what each may run
// (fairway creds list). now decides which have expired.
func listCreds(out io.Writer, k *natsauth.Keyring, now time.Time) error {
	rec, err := k.IssuedRecords()
	if err != nil {
		return err
	}
	tenants, err := k.AccountNames(natsauth.KindTenant)
	if err != nil {
		return err
	}
	executors, err := k.AccountNames(natsauth.KindExecutor)
	if err != nil {
		return err
	}
	count := func(v int64) string {
		if v < 0 {
			return "unlimited"
		}
		return strconv.FormatInt(v, 10)
	}
	size := func(v int64) string {
		if v < 0 {
			return "unlimited"
		}
		return config.FormatByteSize(v)
	}
	limits := make(map[string]natsauth.Limits) // by kind/name
	for kind, names := range map[string][]string{natsauth.KindTenant: tenants, natsauth.KindExecutor: executors} {
		for _, n := range names {
			l, err := k.Limits(kind, n)
			if err != nil {
				return err
			}
			limits[kind+"/"+n] = l
		}
	}

	if len(tenants) == 0 {
		fmt.Fprintln(out, "(no tenant accounts)")
	} else {
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TENANT\tCONNECTIONS\tSUBSCRIPTIONS\tPAYLOAD\tSUBMIT BYTES\tCREDENTIALS\tREVOKED BEFORE")
		for _, t := range tenants {
			l := limits[natsauth.KindTenant+"/"+t]
			submit := submitBytesText(l.SubmitBytes)
			if l.SubmitBytes == 0 {
				submit += " (default)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t, count(l.Connections), count(l.Subscriptions), size(l.Payload), submit,
				credsSummary(rec, natsauth.KindTenant, t, l.RevokedBefore, now), stamp(l.RevokedBefore))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	if len(executors) == 0 {
		_, err := fmt.Fprintln(out, "(no executor accounts)")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "EXECUTOR\tCONNECTIONS\tSUBSCRIPTIONS\tPAYLOAD\tCREDENTIALS\tREVOKED BEFORE")
	for _, x := range executors {
		l := limits[natsauth.KindExecutor+"/"+x]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", x, count(l.Connections), count(l.Subscriptions), size(l.Payload),
			credsSummary(rec, natsauth.KindExecutor, x, l.RevokedBefore, now), stamp(l.RevokedBefore))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	// The executor credentials: those issued alike (same grant, same
	// state) on one line.
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "EXECUTOR\tCREDENTIALS\tLAST ISSUED\tMAY RUN\tSTATE")
	var unrecorded []string
	for _, x := range executors {
		l := limits[natsauth.KindExecutor+"/"+x]
		if rec.Unrecorded(natsauth.KindExecutor, x, l.RevokedBefore) {
			unrecorded = append(unrecorded, x)
			fmt.Fprintf(w, "%s\t?\tbefore records were kept\tmay be wide (any task, any group)\tunrecorded\n", x)
		}
		type line struct {
			n        int
			last     time.Time
			may, how string
		}
		var lines []*line
		for _, i := range rec.Of(natsauth.KindExecutor, x) {
			g, err := i.Grant()
			may := mayRun(g)
			if err != nil {
				may = "unreadable grant: " + err.Error()
			}
			how := credState(i, l.RevokedBefore, now)
			j := slices.IndexFunc(lines, func(l *line) bool { return l.may == may && l.how == how })
			if j < 0 {
				lines = append(lines, &line{may: may, how: how})
				j = len(lines) - 1
			}
			lines[j].n++
			lines[j].last = i.Time
		}
		for _, c := range lines {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", x, c.n, stamp(c.last), c.may, c.how)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, x := range unrecorded {
		fmt.Fprintf(out, "\nexecutor %s: credentials issued before records were kept: may be wide (any task, any group); revoke with 'fairway creds revoke executor %s' and issue narrow ones\n", x, x)
	}
	return nil
}

// stamp writes a time of creds list, "-" when unset.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// mayRun says what an executor credential's grant allows.
func mayRun(g events.Grant) string {
	slots := ""
	switch {
	case g.Slots == 1:
		slots = ", at most 1 slot"
	case g.Slots > 1:
		slots = fmt.Sprintf(", at most %d slots", g.Slots)
	}
	if g.Tasks == nil && g.Groups == nil {
		return "any task, any group (wide)" + slots
	}
	names := func(what string, list []string) string {
		switch {
		case list == nil:
			return "any " + what
		case len(list) == 0:
			return "no " + what
		}
		return what + "s " + strings.Join(list, ",")
	}
	return names("task", g.Tasks) + "; " + names("group", g.Groups) + slots
}

// credState says whether an issued credential works: revoked (by its
// account's revokedBefore), expired, or valid.
func credState(i natsauth.Issued, revokedBefore, now time.Time) string {
	switch {
	case i.RevokedBy(revokedBefore):
		return "revoked"
	case !i.Expires.IsZero() && !now.Before(i.Expires):
		return "expired " + stamp(i.Expires)
	case !i.Expires.IsZero():
		return "valid until " + stamp(i.Expires)
	}
	return "valid"
}

// credsSummary counts an account's credentials by state for creds list:
// "2 valid, 1 revoked".
func credsSummary(rec natsauth.Records, kind, name string, revokedBefore, now time.Time) string {
	var valid, revoked, expired int
	for _, i := range rec.Of(kind, name) {
		switch s := credState(i, revokedBefore, now); {
		case s == "revoked":
			revoked++
		case strings.HasPrefix(s, "expired"):
			expired++
		default:
			valid++
		}
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{valid, "valid"}, {revoked, "revoked"}, {expired, "expired"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if rec.Unrecorded(kind, name, revokedBefore) {
		parts = append(parts, "earlier ones unrecorded")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
