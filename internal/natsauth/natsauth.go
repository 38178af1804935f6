// Package natsauth provisions Fairway's NATS accounts in operator (JWT)
// mode, where each tenant and each executor is an account of its own and
// isolation holds by construction rather than by a permissions file.
//
// The layout, under one operator:
//
//	SYS               the system account (claim updates, server events)
//	FAIRWAY           coordinators and operators; holds the JetStream streams.
//	                  Exports, as services: <p>.api.*.*, <p>.tenant-submit.*.*,
//	                  <p>.submit.*.* (tenants provisioned before 2026-11-26),
//	                  <p>.exec.*.>, <p>.executor-results.*, <p>.results.*
//	                  (executors provisioned before 2026-11-28); as streams: <p>.events.>,
//	                  <p>.progress.>, <p>.executor.*.*, <p>.notify.work
//	TENANT_<group>    one tenant. Imports <p>.api.<group>.* and
//	                  <p>.tenant-submit.<group>.* as <p>.submit.<group>.*
//	                  (services; captured by the tenant's own submit
//	                  stream <P>_SUBMIT_T_<group> in FAIRWAY) and
//	                  <p>.events.<group>.> (stream, captured by the tenant's
//	                  own stream <P>_EVENTS) and <p>.progress.<group>.>
//	                  (stream, core NATS). Nothing else exists in it.
//	EXECUTOR_<app-id> one executor. Imports <p>.exec.<app-id>.> and
//	                  <p>.executor-results.<app-id> as <p>.results.<app-id>
//	                  (services; captured by the executor's own results
//	                  stream <P>_RESULTS_E_<app-id> in FAIRWAY),
//	                  <p>.executor.<app-id>.* and <p>.notify.work (streams).
//	                  No JetStream.
//
// A tenant's connection therefore cannot name another group's subjects at
// all: no subscription, consumer, inbox or JetStream call reaches them, and
// replies come back through the service imports' response mappings. An
// executor's subjects carry its app-id, and the only app-id its account
// can publish under is its own, so the coordinators take the executor's
// identity from the subject.
//
// The keys live in one directory (0700, files 0600): the operator's, the
// system account's and every account's seed. The same directory serves
// fairway dev (which runs an embedded server with a directory resolver) and
// production (fairway creds, then push the account JWTs to the servers).
package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Account names.
const (
	SystemAccount  = "SYS"
	FairwayAccount = "FAIRWAY"
	tenantPrefix   = "TENANT_"
	executorPrefix = "EXECUTOR_"
)

// Tenant JetStream limits: a tenant's own copy of its events.
const (
	// TenantDiskDefault bounds the disk a tenant's streams use (1 GiB).
	TenantDiskDefault = 1 << 30
	// TenantStreamsDefault bounds a tenant's streams.
	TenantStreamsDefault = 4
	// TenantConsumersDefault bounds a tenant's consumers.
	TenantConsumersDefault = 256
)

// ErrNoKeys is returned by Open when the directory holds no operator key
// and create is false.
var ErrNoKeys = errors.New("no NATS operator key")

// Keyring is a directory of keys that signs Fairway's accounts and users.
type Keyring struct {
	dir    string
	prefix string

	operator nkeys.KeyPair
	system   nkeys.KeyPair
	fairway  nkeys.KeyPair
}

// Open reads the keys in dir, creating the directory and the operator,
// system and FAIRWAY keys when create is true and they are missing.
// prefix is the subject prefix (nats.prefix) the exports are built for.
func Open(dir, prefix string, create bool) (*Keyring, error) {
	if prefix == "" {
		prefix = "fairway"
	}
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the NATS key directory: %w", err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, "operator.nk")); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: run fairway dev --tenants … or fairway creds init first", ErrNoKeys, dir)
	}
	k := &Keyring{dir: dir, prefix: prefix}
	var err error
	if k.operator, err = k.key("operator", nkeys.PrefixByteOperator, create); err != nil {
		return nil, err
	}
	if k.system, err = k.key("account-"+SystemAccount, nkeys.PrefixByteAccount, create); err != nil {
		return nil, err
	}
	if k.fairway, err = k.key("account-"+FairwayAccount, nkeys.PrefixByteAccount, create); err != nil {
		return nil, err
	}
	return k, nil
}

// Dir is the key directory.
func (k *Keyring) Dir() string { return k.dir }

// key reads the seed in <dir>/<name>.nk, or makes one.
func (k *Keyring) key(name string, kind nkeys.PrefixByte, create bool) (nkeys.KeyPair, error) {
	path := filepath.Join(k.dir, name+".nk")
	seed, err := os.ReadFile(path) //nolint:gosec // G304: the keyring's own file; callers pass fixed names or names CheckName accepted (no path separator)
	if err == nil {
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("reading key %s: %w", path, err)
		}
		return kp, nil
	}
	if !errors.Is(err, os.ErrNotExist) || !create {
		return nil, fmt.Errorf("reading key %s: %w", path, err)
	}
	kp, err := nkeys.CreatePair(kind)
	if err != nil {
		return nil, err
	}
	seed, err = kp.Seed()
	if err != nil {
		return nil, err
	}
	if err := secret.WriteFile(path, seed); err != nil {
		return nil, err
	}
	return kp, nil
}

// OperatorJWT is the operator's self-signed JWT, naming the system account.
func (k *Keyring) OperatorJWT() (string, error) {
	pub, _ := k.operator.PublicKey()
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = "fairway"
	oc.SystemAccount, _ = k.system.PublicKey()
	return oc.Encode(k.operator)
}

// SystemAccountPublicKey names the system account.
func (k *Keyring) SystemAccountPublicKey() string {
	pub, _ := k.system.PublicKey()
	return pub
}

// Account is a signed account: its public key (its name on the server) and
// its JWT.
type Account struct {
	Name      string
	PublicKey string
	JWT       string
}

// SystemAccountJWT signs the system account.
func (k *Keyring) SystemAccountJWT() (Account, error) {
	return k.sign(SystemAccount, k.system, func(*jwt.AccountClaims) {})
}

// FairwayAccountJWT signs the account of coordinators and operators, with
// the exports tenants and executors import. Its JetStream has no limit of
// its own: every stream in it is bounded in bytes (the shared ones by the
// nats.*-max-bytes settings, each tenant's and executor's by its own), and
// JetStream reserves each stream's bound from the servers' storage when
// the stream is made, so the account's disk is the sum of its streams'
// bounds. (A fixed account limit larger than a server's store would keep
// JetStream off for the whole account on that server.)
func (k *Keyring) FairwayAccountJWT() (Account, error) {
	p := k.prefix
	return k.sign(FairwayAccount, k.fairway, func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumer: -1}
		service := func(name, subject string) *jwt.Export {
			return &jwt.Export{Name: name, Subject: jwt.Subject(subject), Type: jwt.Service, ResponseType: jwt.ResponseTypeSingleton}
		}
		stream := func(name, subject string) *jwt.Export {
			return &jwt.Export{Name: name, Subject: jwt.Subject(subject), Type: jwt.Stream}
		}
		ac.Exports.Add(
			service("tenant-api", p+".api.*.*"),
			service("submit", p+".submit.*.*"), // tenants provisioned before their own submit streams
			service("tenant-submit", p+".tenant-submit.*.*"),
			stream("events", p+".events.>"),
			stream("progress", p+".progress.>"),
			service("executor-protocol", p+".exec.*.>"),
			service("executor-own-results", p+".executor-results.*"),
			service("executor-results", p+".results.*"), // executors provisioned before their own results streams
			stream("executor-commands", p+".executor.*.*"),
			stream("notify-work", p+".notify.work"),
		)
	})
}

// TenantAccountJWT signs the account of one tenant (a group): it reaches its
// own API, submissions and events, and nothing else.
func (k *Keyring) TenantAccountJWT(group string) (Account, error) {
	if err := fairway.CheckName("group", group); err != nil {
		return Account{}, err
	}
	kp, err := k.key("account-"+tenantPrefix+group, nkeys.PrefixByteAccount, true)
	if err != nil {
		return Account{}, err
	}
	lim, err := k.Limits(KindTenant, group)
	if err != nil {
		return Account{}, err
	}
	fw, _ := k.fairway.PublicKey()
	p := k.prefix
	return k.sign(tenantPrefix+group, kp, func(ac *jwt.AccountClaims) {
		lim.apply(ac)
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{DiskStorage: TenantDiskDefault, MemoryStorage: 0,
			Streams: TenantStreamsDefault, Consumer: TenantConsumersDefault}
		ac.Imports.Add(
			&jwt.Import{Name: "api", Account: fw, Type: jwt.Service, Subject: jwt.Subject(p + ".api." + group + ".*")},
			// What the tenant publishes to <p>.submit.<group>.<task> arrives
			// as <p>.tenant-submit.<group>.<task>, which only the tenant's
			// own submit stream captures (events.EnsureTenantSubmitStream):
			// its duplicate window and its backlog are its own.
			&jwt.Import{Name: "submit", Account: fw, Type: jwt.Service, Subject: jwt.Subject(p + ".tenant-submit." + group + ".*"),
				LocalSubject: jwt.RenamingSubject(p + ".submit." + group + ".*")},
			&jwt.Import{Name: "events", Account: fw, Type: jwt.Stream, Subject: jwt.Subject(p + ".events." + group + ".>")},
			&jwt.Import{Name: "progress", Account: fw, Type: jwt.Stream, Subject: jwt.Subject(p + ".progress." + group + ".>")},
		)
	})
}

// ExecutorAccountJWT signs the account of one executor: it speaks the
// executor protocol and reports under its own app-id only.
func (k *Keyring) ExecutorAccountJWT(appID string) (Account, error) {
	if err := fairway.CheckName("app-id", appID); err != nil {
		return Account{}, err
	}
	kp, err := k.key("account-"+executorPrefix+appID, nkeys.PrefixByteAccount, true)
	if err != nil {
		return Account{}, err
	}
	lim, err := k.Limits(KindExecutor, appID)
	if err != nil {
		return Account{}, err
	}
	fw, _ := k.fairway.PublicKey()
	p := k.prefix
	return k.sign(executorPrefix+appID, kp, func(ac *jwt.AccountClaims) {
		lim.apply(ac)
		ac.Imports.Add(
			// Share: the servers tell the coordinators who sent each
			// message (Nats-Request-Info), with the tags of its
			// credential, which state what it may run (events.Grant).
			&jwt.Import{Name: "protocol", Account: fw, Type: jwt.Service, Subject: jwt.Subject(p + ".exec." + appID + ".>"), Share: true},
			// What the executor publishes to <p>.results.<app-id> arrives as
			// <p>.executor-results.<app-id>, which only its own results
			// stream captures (events.EnsureExecutorResultStream): a flood
			// of its reports fills its own stream's bytes, no other's.
			&jwt.Import{Name: "results", Account: fw, Type: jwt.Service, Subject: jwt.Subject(p + ".executor-results." + appID),
				LocalSubject: jwt.RenamingSubject(p + ".results." + appID), Share: true},
			&jwt.Import{Name: "commands", Account: fw, Type: jwt.Stream, Subject: jwt.Subject(p + ".executor." + appID + ".*")},
			&jwt.Import{Name: "notify", Account: fw, Type: jwt.Stream, Subject: jwt.Subject(p + ".notify.work")},
		)
	})
}

// AccountJWT signs the account of a tenant (KindTenant, name its group) or
// an executor (KindExecutor, name its app-id), creating its key if new.
func (k *Keyring) AccountJWT(kind, name string) (Account, error) {
	switch kind {
	case KindTenant:
		return k.TenantAccountJWT(name)
	case KindExecutor:
		return k.ExecutorAccountJWT(name)
	}
	return Account{}, fmt.Errorf("%s: only a tenant or an executor has an account of its own", kind)
}

func (k *Keyring) sign(name string, kp nkeys.KeyPair, fill func(*jwt.AccountClaims)) (Account, error) {
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	fill(ac)
	var vr jwt.ValidationResults
	ac.Validate(&vr)
	if vr.IsBlocking(true) {
		return Account{}, fmt.Errorf("account %s: %v", name, vr.Errors())
	}
	token, err := ac.Encode(k.operator)
	if err != nil {
		return Account{}, fmt.Errorf("signing account %s: %w", name, err)
	}
	return Account{Name: name, PublicKey: pub, JWT: token}, nil
}

// Accounts lists the accounts a server needs at start: SYS, FAIRWAY and
// every tenant and executor account whose key is in the directory.
func (k *Keyring) Accounts() ([]Account, error) {
	sys, err := k.SystemAccountJWT()
	if err != nil {
		return nil, err
	}
	fw, err := k.FairwayAccountJWT()
	if err != nil {
		return nil, err
	}
	accounts := []Account{sys, fw}
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".nk")
		if !ok {
			continue
		}
		name, ok = strings.CutPrefix(name, "account-")
		if !ok {
			continue
		}
		var a Account
		switch {
		case strings.HasPrefix(name, tenantPrefix):
			a, err = k.TenantAccountJWT(strings.TrimPrefix(name, tenantPrefix))
		case strings.HasPrefix(name, executorPrefix):
			a, err = k.ExecutorAccountJWT(strings.TrimPrefix(name, executorPrefix))
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		accounts = append(accounts, a)
	}
	return accounts, nil
}

// The kinds of user a Keyring issues credentials for.
const (
	KindOperator    = "operator"    // FAIRWAY: the operator API and everything else
	KindCoordinator = "coordinator" // FAIRWAY
	KindSystem      = "system"      // SYS: pushes account JWTs
	KindTenant      = "tenant"      // TENANT_<name>
	KindExecutor    = "executor"    // EXECUTOR_<name>
)

// Creds issues a user of kind (name: the tenant's group, the executor's
// app-id, or a label) and returns a standard .creds file: a user JWT and
// its nkey seed, usable by any NATS client with nothing else to know.
func (k *Keyring) Creds(kind, name string) ([]byte, error) {
	return k.CredsWith(kind, name, User{})
}

// User is what a credential states beyond its account.
type User struct {
	// Expires, when positive, is how long the servers accept the
	// credential.
	Expires time.Duration
	// Grant is what an executor credential may run (events.Grant): its
	// tags in the user JWT. Only for KindExecutor.
	Grant events.Grant
}

// CredsWith is Creds for a credential that states u.
func (k *Keyring) CredsWith(kind, name string, u User) ([]byte, error) {
	if tags := u.Grant.Tags(); len(tags) > 0 && kind != KindExecutor {
		return nil, fmt.Errorf("only an executor credential states tasks, groups and slots, not a %s's", kind)
	}
	if err := u.Grant.Check(); err != nil {
		return nil, err
	}
	var account nkeys.KeyPair
	switch kind {
	case KindOperator, KindCoordinator:
		account = k.fairway
	case KindSystem:
		account = k.system
	case KindTenant:
		a, err := k.TenantAccountJWT(name)
		if err != nil {
			return nil, err
		}
		if account, err = k.key("account-"+tenantPrefix+name, nkeys.PrefixByteAccount, false); err != nil {
			return nil, fmt.Errorf("tenant %q: %w", a.Name, err)
		}
	case KindExecutor:
		a, err := k.ExecutorAccountJWT(name)
		if err != nil {
			return nil, err
		}
		if account, err = k.key("account-"+executorPrefix+name, nkeys.PrefixByteAccount, false); err != nil {
			return nil, fmt.Errorf("executor %q: %w", a.Name, err)
		}
	default:
		return nil, fmt.Errorf("unknown kind of credential %q (use %s, %s, %s, %s or %s)", kind,
			KindTenant, KindExecutor, KindOperator, KindCoordinator, KindSystem)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	upub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = kind + "-" + name
	if u.Expires > 0 {
		uc.Expires = time.Now().Add(u.Expires).Unix()
	}
	// As they are (TagList.Add would lower their case).
	uc.Tags = append(uc.Tags, u.Grant.Tags()...)
	token, err := uc.Encode(account)
	if err != nil {
		return nil, fmt.Errorf("signing the %s user %q: %w", kind, name, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(token, seed)
}

// WriteCreds issues a user of kind and writes its .creds file to path
// (0600).
func (k *Keyring) WriteCreds(path, kind, name string) error {
	return k.WriteCredsWith(path, kind, name, User{})
}

// WriteCredsWith is WriteCreds for a credential that states u.
func (k *Keyring) WriteCredsWith(path, kind, name string, u User) error {
	creds, err := k.CredsWith(kind, name, u)
	if err != nil {
		return err
	}
	return secret.WriteFile(path, creds)
}

// Push sends an account's JWT to the servers of nc, which must be a
// system-account connection; a server with a full resolver stores it and
// applies it at once (what nsc push does).
func Push(nc *nats.Conn, a Account) error {
	msg, err := nc.Request("$SYS.REQ.CLAIMS.UPDATE", []byte(a.JWT), 5*time.Second)
	if err != nil {
		return fmt.Errorf("pushing account %s: %w (is the NATS server in operator mode with a full resolver, and the credential the system account's?)", a.Name, err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("pushing account %s: undecodable answer %q", a.Name, msg.Data)
	}
	if resp.Error != nil {
		return fmt.Errorf("pushing account %s: the server refused it: %s", a.Name, resp.Error.Description)
	}
	return nil
}

// ServerConfig is the part of a nats-server configuration that makes it
// trust the keyring's operator: the operator JWT, the system account, a
// full resolver storing account JWTs in resolverDir, and the system and
// FAIRWAY accounts preloaded. Tenant and executor accounts are pushed
// (fairway creds add) or preloaded the same way.
func (k *Keyring) ServerConfig(resolverDir string) (string, error) {
	op, err := k.OperatorJWT()
	if err != nil {
		return "", err
	}
	accounts, err := k.Accounts()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Fairway's NATS accounts (written by fairway creds server-config).\n")
	fmt.Fprintf(&b, "operator: %s\n", op)
	fmt.Fprintf(&b, "system_account: %s\n", k.SystemAccountPublicKey())
	fmt.Fprintf(&b, "resolver: {\n  type: full\n  dir: %q\n  allow_delete: false\n  interval: \"2m\"\n}\n", resolverDir)
	fmt.Fprintf(&b, "resolver_preload: {\n")
	for _, a := range accounts {
		fmt.Fprintf(&b, "  # %s\n  %s: %s\n", a.Name, a.PublicKey, a.JWT)
	}
	fmt.Fprintf(&b, "}\n")
	return b.String(), nil
}
