package cli

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/fairwayhq/fairway/internal/secret"
)

// httpToken returns the bearer token of the executor's HTTP endpoint: the
// configured one, or a new random one written to a file only its owner can
// read (whose path it returns), so that an operator on the machine can stop
// the executor and another local user or a web page cannot.
func (e *env) httpToken(appID string) (token, file string, err error) {
	if e.cfg.Executor.HTTPToken != "" {
		return e.cfg.Executor.HTTPToken, "", nil
	}
	token = randomHex(32)
	file = cmp.Or(e.cfg.Executor.HTTPTokenFile, filepath.Join(e.cfg.Dev.Dir, "executor-"+appID+".token"))
	if err := secret.WriteFile(file, []byte(token+"\n")); err != nil {
		return "", "", fmt.Errorf("executor.http-token-file: %w (set executor.http-token, or another executor.http-token-file)", err)
	}
	return token, file, nil
}

// requireToken lets a request through to next only if it comes from no web
// page and carries the bearer token. A browser adds Origin to a cross-origin
// POST (and Sec-Fetch-Site to every request it makes for a page), and no
// page may set Authorization on a "simple" request, so a page can neither
// stop an executor nor learn whether the token it guessed was right.
func requireToken(token string, next http.HandlerFunc) http.HandlerFunc {
	want := sha256.Sum256([]byte(token))
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			http.Error(w, "cross-origin requests are refused", http.StatusForbidden)
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" && site != "same-origin" {
			http.Error(w, "requests from web pages are refused", http.StatusForbidden)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		// Hashes have one length, so the comparison says nothing about the
		// token's length either.
		if sum := sha256.Sum256([]byte(got)); !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fairway executor"`)
			http.Error(w, "missing or wrong bearer token (Authorization: Bearer <executor.http-token>)", http.StatusUnauthorized)
			return
		}
		next(w, r)
	}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
