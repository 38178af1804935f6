// Package secret masks secrets in text that Fairway prints or logs:
// configuration values, connection strings and error messages that quote
// them. It depends on nothing but the standard library, so that every part
// (the configuration, the store, the command) can use the same rules.
package secret

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Masked replaces a secret.
const Masked = "****"

var (
	// userinfoRE matches the scheme and userinfo of a URL anywhere in a
	// text: up to the last @ before the host, so that an unescaped @ in a
	// password is masked too. A comma ends it (comma-separated URLs).
	userinfoRE = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*)://([^\s/?#,]*)@`)
	// passwordRE matches a password keyword of a libpq keyword/value
	// string (spaces around = allowed; a value quoted in '...' may hold
	// spaces and \' escapes, an unquoted one escaped spaces) or of a URL
	// query; sslpassword too.
	passwordRE = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|[^\s&\\])*)`)
)

// natsSchemes are the URL schemes where a user without a password is a
// token (nats://TOKEN@host).
var natsSchemes = []string{"nats", "tls", "ws", "wss"}

// Mask returns s with every secret it recognises replaced by ****:
// the password of each URL's userinfo (postgres://u:****@h), a token given
// as the user of a NATS URL (nats://****@h), and the value of password=
// (and sslpassword=) in a keyword/value connection string or a URL query,
// quoted or not. s may be a single value, a comma-separated list of URLs or
// a whole error message. Everything else stays readable.
func Mask(s string) string {
	s = userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfoRE.FindStringSubmatch(m)
		scheme, userinfo := sub[1], sub[2]
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			return scheme + "://" + user + ":" + Masked + "@"
		}
		if slices.Contains(natsSchemes, strings.ToLower(scheme)) {
			return scheme + "://" + Masked + "@"
		}
		return m // a user name alone is no secret
	})
	return passwordRE.ReplaceAllString(s, "${1}"+Masked)
}

// WriteFile replaces path with a file of mode 0600 holding data, creating
// its directory (0700) when missing. The file is written under a temporary
// name first and renamed, so no reader ever sees it half written or with
// other permissions.
func WriteFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // mode 0600
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // fails once renamed: nothing left to remove
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close() // the error to report is Chmod's
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the error to report is Write's
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
