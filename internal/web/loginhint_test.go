package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/web"
	"github.com/stretchr/testify/require"
)

// TestLoginPageNamesTheTokenFiles reads the dashboard's page as a browser
// that has not logged in does: with the files that hold the tokens
// (fairway dev's, in whatever dev dir) its login paragraph names them,
// escaped; without, it names the configuration keys and no file. Before,
// it named .fairway/web-admin.token whatever the dev dir.
func TestLoginPageNamesTheTokenFiles(t *testing.T) {
	t.Parallel()
	_, nc := natstest.Start(t)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	page := func(cfg web.Config) string {
		t.Helper()
		cfg.Client, cfg.AdminToken = client, "admin-token-0123456789"
		srv, err := web.New(cfg)
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		defer hs.Close()
		res, err := http.Get(hs.URL + "/")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		require.NotEmpty(t, res.Header.Get("Content-Security-Policy"))
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return string(body)
	}

	got := page(web.Config{ReadToken: "read-token-0123456789", AdminTokenFile: "/home/me/dev <x>/web-admin.token",
		ReadTokenFile: "/home/me/dev <x>/web-read.token"})
	require.Contains(t, got, `The admin token is in <code>/home/me/dev &lt;x&gt;/web-admin.token</code>; `+
		`the read-only token is in <code>/home/me/dev &lt;x&gt;/web-read.token</code>.</p>`)
	require.NotContains(t, got, ".fairway/")
	require.Contains(t, got, `<form id="login-form">`, "the rest of the page is served as it is")

	got = page(web.Config{AdminTokenFile: "/srv/dev/web-admin.token"}) // no read-only role
	require.Contains(t, got, `The admin token is in <code>/srv/dev/web-admin.token</code>.</p>`)
	require.NotContains(t, got, "read-only token")

	got = page(web.Config{ReadToken: "read-token-0123456789"}) // fairway web: the tokens are set
	require.Contains(t, got, `<code>web.admin-token</code> (admin)`)
	require.NotContains(t, got, ".fairway/")
	require.NotContains(t, got, "token is in")
}
