package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Validate checks the combinations of the nats.* keys that each key alone
// cannot: a client certificate needs its key, a password needs a user, and
// only one way to authenticate may be given. Load calls it; call it for a
// NATSConfig built by hand. Errors name the keys.
func (c NATSConfig) Validate() error { return errors.Join(c.problems()...) }

// problems returns each error of Validate.
func (c NATSConfig) problems() []error {
	var errs []error
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		errs = append(errs, errors.New("nats.tls-cert is set but nats.tls-key is not: a client certificate needs its private key (--tls-key)"))
	case c.TLSCert == "" && c.TLSKey != "":
		errs = append(errs, errors.New("nats.tls-key is set but nats.tls-cert is not: pass the client certificate too (--tls-cert)"))
	case c.TLSCert != "":
		if _, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey); err != nil {
			errs = append(errs, fmt.Errorf("nats.tls-cert %s and nats.tls-key %s are not a PEM certificate and its private key: %w", c.TLSCert, c.TLSKey, err))
		}
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, errors.New("nats.password is set but nats.user is not: pass the user too (--user)"))
	}
	var ways []string
	if urlHasUser(c.URL) {
		ways = append(ways, "a user or token in nats.url")
	}
	for _, w := range []struct{ key, value string }{{"nats.creds", c.Creds}, {"nats.nkey", c.NKey}, {"nats.user", c.User}, {"nats.token", c.Token}} {
		if w.value != "" {
			ways = append(ways, w.key)
		}
	}
	if len(ways) > 1 {
		errs = append(errs, fmt.Errorf("%s are set together: give only one way to authenticate to NATS", strings.Join(ways, " and ")))
	}
	return errs
}

// urlHasUser reports whether one of the comma-separated URLs has userinfo.
func urlHasUser(urls string) bool {
	for part := range strings.SplitSeq(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(part)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// readableFile checks that the file at path can be read.
func readableFile(path string) error {
	_, err := readSecretFile(path)
	return err
}

// readSecretFile reads a file the configuration names (a credentials,
// token or key file of the user's).
func readSecretFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: reading the file the user configured is the point
	if err != nil {
		return nil, fmt.Errorf("cannot read the file: %w", err)
	}
	return data, nil
}

// credsFile checks that path holds a NATS credentials file: a user JWT and
// its nkey seed, as nsc writes them.
func credsFile(path string) error {
	data, err := readSecretFile(path)
	if err != nil {
		return err
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err == nil {
		_, err = jwt.DecodeUserClaims(token)
	}
	if err != nil {
		return fmt.Errorf("not a NATS credentials file (no user JWT: %v); nsc generate creds writes one", err)
	}
	if _, err := jwt.ParseDecoratedUserNKey(data); err != nil {
		return fmt.Errorf("not a NATS credentials file (no user nkey seed: %v); nsc generate creds writes one", err)
	}
	return nil
}

// nkeySeedFile checks that path holds a user nkey seed (SU...).
func nkeySeedFile(path string) error {
	data, err := readSecretFile(path)
	if err != nil {
		return err
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return fmt.Errorf("not an nkey seed file: %v (nk -gen user writes one)", err)
	}
	defer kp.Wipe()
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return errors.New("the nkey seed is not a user seed (SU...)")
	}
	return nil
}

// caFile checks that path holds at least one PEM certificate.
func caFile(path string) error {
	data, err := readSecretFile(path)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return errors.New("holds no PEM certificate")
	}
	return nil
}
