package natsauth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/nats-io/jwt/v2"
)

// issuedFile is the record of the credentials a keyring issued, in its
// directory: one JSON object a line, appended to, 0600. Its first line
// says when the record began and which accounts existed then (their
// earlier credentials are not in it).
const issuedFile = "issued.jsonl"

// Issued is one credential the keyring issued (IssueCreds).
type Issued struct {
	// Time is when it was issued: its user JWT's issue time, in whole
	// seconds, as the servers compare it with a revocation.
	Time time.Time `json:"time"`
	// Kind and Name are its kind (KindTenant, KindExecutor, …) and its
	// tenant's group, executor's app-id or label.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// User is its public key.
	User string `json:"user"`
	// Expires, when set, is when the servers stop accepting it.
	Expires time.Time `json:"expires,omitzero"`
	// Tags are its user JWT's tags: an executor credential's grant (Grant).
	Tags []string `json:"tags,omitempty"`
	// Path is the file it was written to.
	Path string `json:"path,omitempty"`
}

// Grant is what an executor credential may run, read from its tags: nil
// Tasks and Groups (a credential issued with --any-task --any-group) run
// any task of any group.
func (i Issued) Grant() (events.Grant, error) { return events.GrantFromTags(i.Tags) }

// RevokedBy says whether an account revocation (Limits.RevokedBefore)
// revokes the credential: the servers refuse a credential issued at or
// before it.
func (i Issued) RevokedBy(revokedBefore time.Time) bool {
	return !revokedBefore.IsZero() && revokedBefore.Unix() >= i.Time.Unix()
}

// Records is the record of issued credentials.
type Records struct {
	// Began is when the keyring began keeping the record; zero when it
	// keeps none yet.
	Began time.Time
	// Before names the tenant and executor accounts (TENANT_acme,
	// EXECUTOR_w1) that existed when the record began: it does not list
	// their earlier credentials.
	Before []string
	// Issued are the credentials issued since, oldest first.
	Issued []Issued
}

// Unrecorded says whether the account of a tenant or an executor may
// hold credentials the record does not list: issued before the record
// began (or the keyring keeps none), and not all revoked since
// (revokedBefore is the account's Limits.RevokedBefore).
func (r Records) Unrecorded(kind, name string, revokedBefore time.Time) bool {
	account, _, err := accountOf(kind, name)
	if err != nil {
		return false
	}
	if r.Began.IsZero() {
		return true
	}
	return slices.Contains(r.Before, account) && revokedBefore.Before(r.Began.Truncate(time.Second))
}

// Of returns the recorded credentials of kind and name, oldest first.
func (r Records) Of(kind, name string) []Issued {
	var out []Issued
	for _, i := range r.Issued {
		if i.Kind == kind && i.Name == name {
			out = append(out, i)
		}
	}
	return out
}

// recordLine is one line of the record: a credential, or the first line.
type recordLine struct {
	Issued
	Began  time.Time `json:"records_begin,omitzero"`
	Before []string  `json:"accounts_before,omitempty"`
}

func (k *Keyring) issuedPath() string { return filepath.Join(k.dir, issuedFile) }

// BeginRecords starts the record of issued credentials unless it exists,
// naming the tenant and executor accounts that exist now: credentials
// issued before cannot be listed, and fairway creds list says so. Call it
// before making new accounts, so that they do not count as older than the
// record.
func (k *Keyring) BeginRecords() error {
	if _, err := os.Stat(k.issuedPath()); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	before := []string{}
	for _, kind := range []string{KindTenant, KindExecutor} {
		names, err := k.AccountNames(kind)
		if err != nil {
			return err
		}
		for _, n := range names {
			account, _, _ := accountOf(kind, n)
			before = append(before, account)
		}
	}
	line, err := json.Marshal(struct {
		Began  time.Time `json:"records_begin"`
		Before []string  `json:"accounts_before"`
	}{time.Now().UTC(), before})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(k.issuedPath(), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil // begun meanwhile by another process
	}
	if err != nil {
		return fmt.Errorf("beginning the record of issued credentials: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Close())
}

// IssueCreds is WriteCredsWith, recorded: it issues a user of kind that
// states u, records it (creds list shows it), then writes its .creds file
// to path (0600).
func (k *Keyring) IssueCreds(path, kind, name string, u User) (Issued, error) {
	if err := k.BeginRecords(); err != nil {
		return Issued{}, err
	}
	creds, err := k.CredsWith(kind, name, u)
	if err != nil {
		return Issued{}, err
	}
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return Issued{}, err
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return Issued{}, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	i := Issued{Time: time.Unix(uc.IssuedAt, 0).UTC(), Kind: kind, Name: name, User: uc.Subject, Tags: uc.Tags, Path: path}
	if uc.Expires > 0 {
		i.Expires = time.Unix(uc.Expires, 0).UTC()
	}
	// Recorded first: the record lists every credential written.
	if err := k.appendRecord(i); err != nil {
		return Issued{}, err
	}
	return i, secret.WriteFile(i.Path, creds)
}

func (k *Keyring) appendRecord(i Issued) error {
	line, err := json.Marshal(i)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(k.issuedPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("recording the credential issued: %w", err)
	}
	// One write of one line: appends of other processes do not interleave.
	_, err = f.Write(append(line, '\n'))
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("recording the credential issued: %w", err)
	}
	return nil
}

// IssuedRecords reads the record of issued credentials (none when the
// keyring keeps none yet).
func (k *Keyring) IssuedRecords() (Records, error) {
	data, err := os.ReadFile(k.issuedPath())
	if errors.Is(err, os.ErrNotExist) {
		return Records{}, nil
	}
	if err != nil {
		return Records{}, fmt.Errorf("reading the record of issued credentials: %w", err)
	}
	var r Records
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l recordLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return Records{}, fmt.Errorf("%s line %d: %w", k.issuedPath(), n, err)
		}
		if !l.Began.IsZero() {
			if r.Began.IsZero() {
				r.Began, r.Before = l.Began, l.Before
			}
			continue
		}
		r.Issued = append(r.Issued, l.Issued)
	}
	return r, sc.Err()
}

// AccountNames lists the tenants (kind KindTenant: their groups) or the
// executors (KindExecutor: their app-ids) that have an account in the
// keys directory, sorted.
func (k *Keyring) AccountNames(kind string) ([]string, error) {
	prefix, _, err := accountOf(kind, "")
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "account-"+prefix)
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, ".nk"); ok && name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
