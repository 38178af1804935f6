package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
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

  fairway creds add executor worker-2      # <dev-dir>/creds/executor-worker-2.creds
  fairway creds add tenant initech         # <dev-dir>/creds/tenant-initech.creds

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
				if err := k.WriteCreds(path, kind, kind); err != nil {
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
it may register and get jobs of), --groups (only these groups' jobs: a
tenant's own executors), --slots (the most slots it may register). The
coordinators enforce them on its registration and on every request for
jobs; without them it may run any task of any group. The statement is
signed into the credential: issue a new one to change it, and revoke the
old ones (creds revoke executor NAME).`,
		Example: `  fairway creds add tenant acme
  fairway creds add executor mailer --tasks send-mail,poll-mail --slots 8
  fairway creds add executor acme-own --tasks export --groups acme --expires 720h`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := args[0], ""
			if len(args) == 2 {
				name = args[1]
			}
			set := func(flag string, v int64, field *int64) {
				if cmd.Flags().Changed(flag) {
					*field = v
				}
			}
			if f := cmd.Flags(); f.Changed("max-connections") || f.Changed("max-subscriptions") || f.Changed("max-payload") {
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
				if err := cur.SetLimits(kind, name, l); err != nil {
					return usageError{err}
				}
			}
			user := natsauth.User{Expires: expires}
			if f := cmd.Flags(); f.Changed("tasks") || f.Changed("groups") || f.Changed("slots") {
				if kind != natsauth.KindExecutor {
					return usageError{fmt.Errorf("--tasks, --groups and --slots state what an executor credential may run, not a %s's", kind)}
				}
				if f.Changed("tasks") {
					user.Grant.Tasks = nonNil(grantTasks)
				}
				if f.Changed("groups") {
					user.Grant.Groups = nonNil(grantGroups)
				}
				user.Grant.Slots = grantSlots
			}
			return e.addCreds(cmd.Context(), keys(), kind, name, out, push, user)
		},
	}, "dev.dir", "nats.url", "nats.prefix")
	addCmd.Flags().StringVar(&out, "out", "", "file to write the credential to (default <dev-dir>/creds/<kind>-<NAME>.creds)")
	addCmd.Flags().BoolVar(&push, "push", true, "push a new account to the NATS server at --nats-url")
	addCmd.Flags().DurationVar(&expires, "expires", 0, "the credential expires after this long (e.g. 720h; 0: never)")
	addCmd.Flags().StringSliceVar(&grantTasks, "tasks", nil, "an executor credential may register and run only these tasks (default: any)")
	addCmd.Flags().StringSliceVar(&grantGroups, "groups", nil, "an executor credential gets only these groups' jobs (default: any group)")
	addCmd.Flags().IntVar(&grantSlots, "slots", 0, "an executor credential may register at most this many slots (default 0: any number)")
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

	cmd.AddCommand(initCmd, addCmd, revokeCmd, serverCmd)
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

// addCreds issues one credential, pushing a new account first.
func (e *env) addCreds(ctx context.Context, keysDir, kind, name, out string, push bool, user natsauth.User) error {
	k, err := natsauth.Open(keysDir, e.cfg.NATS.Prefix, false)
	if err != nil {
		return err
	}
	var account *natsauth.Account
	switch kind {
	case natsauth.KindTenant, natsauth.KindExecutor:
		if name == "" {
			return usageError{fmt.Errorf("creds add %s needs a NAME (the %s)", kind, map[string]string{natsauth.KindTenant: "group", natsauth.KindExecutor: "app-id"}[kind])}
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
	if err := k.WriteCredsWith(out, kind, name, user); err != nil {
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
	return ensureTenantSubmitStreams(ctx, fnc, e.cfg.NATS.Prefix, e.streamOptions(), name)
}

// ensureTenantSubmitStreams creates each tenant's own submit stream
// (events.EnsureTenantSubmitStream) through a connection of the
// coordinators' account.
func ensureTenantSubmitStreams(ctx context.Context, nc *nats.Conn, prefix string, opts events.StreamOptions, tenants ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, t := range tenants {
		if err := events.EnsureTenantSubmitStream(ctx, js, events.NewSubjects(prefix), t, opts); err != nil {
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
	creds := filepath.Join(devDir, credsDirName)
	if err := os.MkdirAll(creds, 0o700); err != nil {
		return nil, "", err
	}
	write := func(path, kind, name string) error { return k.WriteCreds(path, kind, name) }
	var errs []error
	for _, t := range tenants {
		if _, err := k.TenantAccountJWT(t); err != nil {
			return nil, "", err
		}
		errs = append(errs, write(filepath.Join(creds, "tenant-"+t+".creds"), natsauth.KindTenant, t))
	}
	if _, err := k.ExecutorAccountJWT(executorAppID); err != nil {
		return nil, "", fmt.Errorf("the dev executor's app-id: %w", err)
	}
	errs = append(errs,
		write(filepath.Join(creds, "executor-"+executorAppID+".creds"), natsauth.KindExecutor, executorAppID),
		write(filepath.Join(creds, "operator.creds"), natsauth.KindOperator, "operator"),
		write(filepath.Join(creds, "coordinator.creds"), natsauth.KindCoordinator, "coordinator"),
		write(filepath.Join(k.Dir(), systemCredsName), natsauth.KindSystem, "system"),
	)
	return k, creds, errors.Join(errs...)
}
