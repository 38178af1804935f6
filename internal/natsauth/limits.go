package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/nats-io/jwt/v2"
)

// Limits are what one tenant or executor account may use of the NATS
// servers, written into its account JWT: the servers enforce them, and one
// account cannot exhaust what every account shares (connections, file
// descriptors, subscriptions' memory). Negative means unlimited.
type Limits struct {
	// Connections bounds the account's connections at once.
	Connections int64 `json:"connections"`
	// Subscriptions bounds the account's subscriptions, all connections
	// together.
	Subscriptions int64 `json:"subscriptions"`
	// Payload bounds one message.
	Payload int64 `json:"payload"`
	// SubmitBytes bounds a tenant's submissions waiting in its own submit
	// stream (events.StreamOptions.TenantSubmitMaxBytes): 0 is the default
	// (events.TenantSubmitMaxBytesDefault), negative unlimited. It is not
	// written into the account JWT: fairway creds add tenant applies it to
	// the stream it creates or updates.
	SubmitBytes int64 `json:"submit_bytes,omitempty"`
	// RevokedBefore, when set, revokes every credential of the account
	// issued before it (fairway creds revoke): the servers close their
	// connections and refuse them.
	RevokedBefore time.Time `json:"revoked_before,omitzero"`
}

// The default limits. A tenant submits and reads its events through a few
// connections (a few hundred client processes at most); an executor needs
// one or two. A message carries at most 8 MiB (nats.max-msg-size's
// default, the embedded server's max_payload).
var (
	TenantLimitsDefault   = Limits{Connections: 256, Subscriptions: 10_000, Payload: 8 << 20}
	ExecutorLimitsDefault = Limits{Connections: 16, Subscriptions: 1_000, Payload: 8 << 20}
)

// limitsPath is where an account's limits are kept: beside its key, so
// that every signing of the account (fairway dev, creds server-config,
// creds add) keeps them.
func (k *Keyring) limitsPath(account string) string {
	return filepath.Join(k.dir, "account-"+account+".limits.json")
}

// Limits returns the limits of a tenant's or an executor's account
// (kind KindTenant or KindExecutor): the defaults unless set.
func (k *Keyring) Limits(kind, name string) (Limits, error) {
	account, def, err := accountOf(kind, name)
	if err != nil {
		return Limits{}, err
	}
	data, err := os.ReadFile(k.limitsPath(account))
	if errors.Is(err, os.ErrNotExist) {
		return def, nil
	}
	if err != nil {
		return Limits{}, fmt.Errorf("reading the limits of %s: %w", account, err)
	}
	l := def
	if err := json.Unmarshal(data, &l); err != nil {
		return Limits{}, fmt.Errorf("reading the limits of %s (%s): %w", account, k.limitsPath(account), err)
	}
	return l, nil
}

// SetLimits keeps the limits of an account; sign it again (and push it)
// for the servers to apply them.
func (k *Keyring) SetLimits(kind, name string, l Limits) error {
	account, _, err := accountOf(kind, name)
	if err != nil {
		return err
	}
	if l.SubmitBytes != 0 && kind != KindTenant {
		return fmt.Errorf("%s: only a tenant has a submit stream of its own to bound", account)
	}
	for field, v := range map[string]int64{"connections": l.Connections, "subscriptions": l.Subscriptions, "payload": l.Payload} {
		if v == 0 {
			return fmt.Errorf("limit %s of %s: 0 would allow nothing (negative: unlimited)", field, account)
		}
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return secret.WriteFile(k.limitsPath(account), append(data, '\n'))
}

// accountOf names the account of a tenant or an executor, with its default
// limits.
func accountOf(kind, name string) (string, Limits, error) {
	switch kind {
	case KindTenant:
		return tenantPrefix + name, TenantLimitsDefault, nil
	case KindExecutor:
		return executorPrefix + name, ExecutorLimitsDefault, nil
	}
	return "", Limits{}, fmt.Errorf("limits are for tenant and executor accounts, not %q", kind)
}

// apply writes l into an account's claims.
func (l Limits) apply(ac *jwt.AccountClaims) {
	unlimited := func(v int64) int64 {
		if v < 0 {
			return jwt.NoLimit
		}
		return v
	}
	ac.Limits.Conn = unlimited(l.Connections)
	ac.Limits.Subs = unlimited(l.Subscriptions)
	ac.Limits.Payload = unlimited(l.Payload)
	if !l.RevokedBefore.IsZero() {
		ac.RevokeAt(jwt.All, l.RevokedBefore)
	}
}

// HasAccount says whether the keys directory holds the account of a tenant
// or an executor (its key: the account was made by creds add or fairway dev).
func (k *Keyring) HasAccount(kind, name string) bool {
	account, _, err := accountOf(kind, name)
	if err != nil || name == "" {
		return false
	}
	_, err = os.Stat(filepath.Join(k.dir, "account-"+account+".nk"))
	return err == nil
}
