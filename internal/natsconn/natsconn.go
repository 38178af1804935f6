// Package natsconn turns the nats.* configuration into nats.go connection
// options: credentials (creds file, nkey seed, user and password, token)
// and TLS (a CA file, a client certificate). Every NATS connection the
// fairway command opens to a NATS server it did not start itself goes
// through Options, so they all authenticate the same way.
package natsconn

import (
	"fmt"

	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/nats-io/nats.go"
)

// Options returns the nats.go options that authenticate and secure a
// connection as c says: nats.UserCredentials for nats.creds,
// nats.NkeyOptionFromSeed for nats.nkey, nats.UserInfo for nats.user and
// nats.password, nats.Token for nats.token, nats.RootCAs for nats.tls-ca
// and nats.ClientCert for nats.tls-cert and nats.tls-key. A user or token in
// c.URL needs no option: nats.go reads it from the URL. It checks c first
// (config.NATSConfig.Validate), and errors name the key at fault.
func Options(c config.NATSConfig) ([]nats.Option, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey %s: %w", c.NKey, err)
		}
		opts = append(opts, opt)
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

// Connect connects to c.URL with Options(c) followed by extra (a name,
// handlers). Its error shows the URL with its secrets masked.
func Connect(c config.NATSConfig, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := Options(c)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.URL, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", secret.Mask(c.URL), err)
	}
	return nc, nil
}
