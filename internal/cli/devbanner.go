package cli

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/secret"
)

// devClientEnv is what fairway dev prints before the commands of its
// banner, so that they reach it from a second terminal whatever its
// directory: an export of each setting the commands need and would not
// have by default (the NATS URL when not 127.0.0.1:4222, the prefix, the
// NATS credentials dev was given). natsURL is where dev's NATS is. Each
// line is indented by two spaces; "" when the defaults reach it.
func (e *env) devClientEnv(natsURL string) string {
	cfg := e.cfg
	var b strings.Builder
	export := func(key, value, note string) {
		b.WriteString("  export " + configKey(key).Env + "=" + shellQuote(value))
		if note != "" {
			b.WriteString("   # " + note)
		}
		b.WriteString("\n")
	}
	if natsURL != configKey("nats.url").Default {
		if masked := secret.Mask(natsURL); masked != natsURL {
			export("nats.url", masked, "the --nats-url dev was given, with its secret in place of "+secret.Masked)
		} else {
			export("nats.url", natsURL, "")
		}
	}
	if cfg.Source("nats.prefix") != config.SourceDefault {
		export("nats.prefix", cfg.NATS.Prefix, "")
	}
	for _, k := range []struct {
		key, value string
		secret     bool
	}{
		{"nats.creds", absPath(cfg.NATS.Creds), false}, {"nats.nkey", absPath(cfg.NATS.NKey), false},
		{"nats.user", cfg.NATS.User, false}, {"nats.password", cfg.NATS.Password, true}, {"nats.token", cfg.NATS.Token, true},
		{"nats.tls-ca", absPath(cfg.NATS.TLSCA), false}, {"nats.tls-cert", absPath(cfg.NATS.TLSCert), false}, {"nats.tls-key", absPath(cfg.NATS.TLSKey), false},
	} {
		switch {
		case cfg.Source(k.key) == config.SourceDefault || k.value == "":
		case k.secret:
			export(k.key, secret.Masked, "the one dev was given")
		default:
			export(k.key, k.value, "")
		}
	}
	return b.String()
}

// configKey describes the configuration key name.
func configKey(name string) config.Key {
	for _, k := range config.Keys() {
		if k.Name == name {
			return k
		}
	}
	return config.Key{Name: name}
}

// absPath makes a file's path absolute, so that it holds from any
// directory; "" stays "".
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
