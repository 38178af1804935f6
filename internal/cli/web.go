package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/httpedge"
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/fairwayhq/fairway/internal/web"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

var webKeys = []string{"nats.url", "nats.prefix", "web.addr", "web.admin-token", "web.read-token", "web.group", "web.max-connections", "web.max-connections-per-address"}

func newWebCmd(e *env) *cobra.Command {
	return e.withConfig(&cobra.Command{
		Use:   "web",
		Short: "Serve the dashboard and the HTTP API",
		Long: `Serve the dashboard and its HTTP API (GET /api/openapi.json describes it) on
--web-addr, 127.0.0.1:8090 by default: loopback unless you say otherwise.

It is a NATS client like any other and needs no database: each HTTP request
becomes a request to the coordinators' operator API, or, with --web-group,
to that one tenant's API (connect with the tenant's credential, --creds).
So the same authorisation and tenant scoping apply as on NATS.

Two roles log in with a token each: admin (--web-admin-token, required) and
read-only (--web-read-token), which sees no args or results and changes
nothing. fairway dev serves the same dashboard, with tokens of its own.`,
		Example: `  FAIRWAY_WEB_ADMIN_TOKEN=$(openssl rand -hex 24) fairway web --creds operator.creds
  fairway web --web-addr 0.0.0.0:8090 --web-admin-token "$ADMIN" --web-read-token "$VIEWER"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := e.connect("fairway-web")
			if err != nil {
				return err
			}
			defer nc.Close()
			url, err := e.startWeb(cmd.Context(), nc, webTokens{admin: e.cfg.Web.AdminToken, read: e.cfg.Web.ReadToken})
			if err != nil {
				return err
			}
			e.log.Info("dashboard ready: log in with web.admin-token", "url", url)
			<-cmd.Context().Done()
			return nil
		},
	}, webKeys...)
}

// webTokens are the dashboard's tokens, and the files that hold them when
// fairway dev wrote them (the login page names those).
type webTokens struct {
	admin, read         string
	adminFile, readFile string
}

// startWeb serves the dashboard on web.addr until ctx ends and returns its
// URL.
func (e *env) startWeb(ctx context.Context, nc *nats.Conn, tokens webTokens) (string, error) {
	client, err := events.NewClient(nc, events.ClientOptions{Prefix: e.cfg.NATS.Prefix, MaxArgsSize: e.cfg.Coordinator.MaxArgsSize})
	if err != nil {
		return "", err
	}
	srv, err := web.New(web.Config{Client: client, AdminToken: tokens.admin, ReadToken: tokens.read, Group: e.cfg.Web.Group,
		AdminTokenFile: tokens.adminFile, ReadTokenFile: tokens.readFile, Logger: e.log.With("component", "web"),
		Edge: httpedge.Limits{Total: e.cfg.Web.MaxConnections, PerAddr: e.cfg.Web.MaxConnectionsPerAddr}})
	if err != nil {
		return "", err
	}
	addr, err := srv.Listen(ctx, e.cfg.Web.Addr)
	if err != nil {
		return "", fmt.Errorf("%w (set web.addr, --web-addr, to a free host:port)", err)
	}
	host := addr.String()
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	return "http://" + host + "/", nil
}

// devWebToken is web.admin-token or web.read-token in fairway dev: the
// configured one, else the one in <dev-dir>/<file> from an earlier run (so
// that a bookmarked login link keeps working), else a new random one
// written there (mode 0600).
func devWebToken(configured, dir, file string) (token, path string, err error) {
	if configured != "" {
		return configured, "", nil
	}
	path = filepath.Join(dir, file)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // the login page and the log name it, read from anywhere
	}
	b, err := os.ReadFile(path) //nolint:gosec // G304: the token file in the user's dev dir
	if err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), path, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("reading %s: %w", path, err)
	}
	token = randomHex(24)
	if err := secret.WriteFile(path, []byte(token+"\n")); err != nil {
		return "", "", fmt.Errorf("writing the dashboard token: %w", err)
	}
	return token, path, nil
}
