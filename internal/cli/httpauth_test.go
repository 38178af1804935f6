package cli_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/stretchr/testify/require"
)

// testToken is a valid executor.http-token.
const testToken = "test-token-0123456789abcdef"

// postShutdown POSTs to an executor's shutdownAndExit with the bearer token
// (none if ""), and extra headers.
func postShutdown(t *testing.T, addr, token string, header http.Header) *http.Response {
	t.Helper()
	return doShutdown(t, http.MethodPost, addr, token, header)
}

func doShutdown(t *testing.T, method, addr, token string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+"/api/v1/shutdownAndExit", strings.NewReader("{}"))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp
}

// readToken reads a generated token file and checks that only its owner
// may read it.
func readToken(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s", path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	token := strings.TrimSpace(string(data))
	require.Len(t, token, 64)
	return token
}

// devToken reads the token fairway dev generated into its dev dir.
func devToken(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "executor-*.token"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	return readToken(t, files[0])
}

// TestShutdownEndpointNeedsTheTokenAndNoOrigin: shutdownAndExit refuses a
// request without the bearer token (401), with a wrong one (401), from a web
// page (403, even with the right token) and of another method (405); only
// the right token stops the executor. /healthz needs no token.
func TestShutdownEndpointNeedsTheTokenAndNoOrigin(t *testing.T) {
	t.Parallel()
	ns, _ := natstest.Start(t) // no coordinator: the executor waits to register
	addr := freeAddr(t)
	tokenFile := filepath.Join(t.TempDir(), "sub", "executor.token")
	stderr := &devtest.Output{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(t.Context(), nil, []string{"executor", "--nats-url", ns.ClientURL(), "--app-id", "guarded",
			"--http-addr", addr, "--http-token-file", tokenFile, "--log-format", "json"}, &bytes.Buffer{}, stderr)
	}()
	stderr.Wait(t, "executor HTTP endpoint", waitTimeout)
	require.Contains(t, stderr.String(), `"token_file":"`+tokenFile+`"`, "the log says where the token is")
	token := readToken(t, tokenFile)
	require.NotContains(t, stderr.String(), token, "the token itself is not logged")

	health, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	require.NoError(t, health.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, health.StatusCode, "/healthz is open (503: not registered yet)")

	refused := []struct {
		name   string
		method string
		token  string
		header http.Header
		status int
	}{
		{"no token", http.MethodPost, "", nil, http.StatusUnauthorized},
		{"wrong token", http.MethodPost, "x" + token[1:], nil, http.StatusUnauthorized},
		{"token as basic auth", http.MethodPost, "", http.Header{"Authorization": {"Basic " + token}}, http.StatusUnauthorized},
		{"cross-origin text/plain POST", http.MethodPost, "", http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain"}}, http.StatusForbidden},
		{"cross-origin POST with the token", http.MethodPost, token, http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain"}}, http.StatusForbidden},
		{"same-origin-looking Origin with the token", http.MethodPost, token, http.Header{"Origin": {"http://" + addr}}, http.StatusForbidden},
		{"cross-site fetch metadata with the token", http.MethodPost, token, http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"GET with the token", http.MethodGet, token, nil, http.StatusMethodNotAllowed},
	}
	for _, tc := range refused {
		resp := doShutdown(t, tc.method, addr, tc.token, tc.header)
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		select {
		case code := <-done:
			t.Fatalf("%s stopped the executor (exit %d):\n%s", tc.name, code, stderr)
		default:
		}
	}
	resp := postShutdown(t, addr, token, http.Header{"Sec-Fetch-Site": {"none"}, "Content-Type": {"text/plain"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 0, exitCode(t, done, stderr), stderr.String())
	require.Contains(t, stderr.String(), "shutdown asked for before the executor registered")
}

func TestConfigPrintMasksTheHTTPToken(t *testing.T) {
	t.Setenv("FAIRWAY_EXECUTOR_HTTP_TOKEN", testToken)
	code, out, errOut := run(t, "config", "print")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, testToken)
	require.Contains(t, out, "executor.http-token: **** # env")

	code, _, errOut = run(t, "executor", "--http-token", "short-secret")
	require.Equal(t, 1, code)
	require.NotContains(t, errOut, "short-secret")
	require.Contains(t, errOut, "executor.http-token")
	require.Contains(t, errOut, "at least 16")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", devtest.FreePort(t))
}
