// Package pgtest gives tests a real PostgreSQL: one throwaway cluster per test binary, a fresh database per test.
//
// Set FAIRWAY_TEST_DATABASE_URL to a postgres:// URL of a superuser (or a role
// with CREATEDB) to use an existing server instead of starting a cluster.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fairwayhq/fairway/internal/pgserver"
)

// EnvURL names the environment variable that points pgtest at an existing server.
const EnvURL = "FAIRWAY_TEST_DATABASE_URL"

var (
	adminURL string // URL of a database on the server to run CREATE/DROP DATABASE from
	prefix   string // prefix of every database this test binary creates

	prepareTpl func(ctx context.Context, url string) error
	tplOnce    sync.Once
	tplName    string // set once the template is ready
	tplErr     error
	createMu   sync.Mutex // serialises CREATE DATABASE
	seq        atomic.Int64
)

// Main starts the cluster, runs the tests, stops the cluster, and exits. Use from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) { os.Exit(run(m)) }

// SetTemplate registers a function that prepares the template database once (e.g. runs migrations); every NewDB clones it (CREATE DATABASE x TEMPLATE tpl), which is much faster than migrating each test database. Call before Main, e.g. in TestMain.
func SetTemplate(prepare func(ctx context.Context, url string) error) { prepareTpl = prepare }

// NewDB creates a fresh, uniquely named database for this test (cloned from the template when one is set), registers its drop in t.Cleanup, and returns its connection URL.
func NewDB(t testing.TB) string {
	t.Helper()
	if !mainRan {
		t.Fatal("pgtest: NewDB needs pgtest.Main in TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }")
	}
	if err := startCluster(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	tplOnce.Do(func() { tplErr = prepareTemplate() })
	if tplErr != nil {
		t.Fatalf("pgtest: prepare template database: %v", tplErr)
	}

	name := fmt.Sprintf("%s_%d_%s", prefix, seq.Add(1), sanitize(t.Name()))
	name = name[:min(len(name), 63)] // PostgreSQL's identifier limit
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if tplName != "" {
		sql += " TEMPLATE " + pgx.Identifier{tplName}.Sanitize()
	}
	createMu.Lock()
	err := adminExec(t.Context(), sql)
	createMu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return urlFor(name)
}

func run(m *testing.M) int {
	mainRan = true
	prefix = fmt.Sprintf("pgtest_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if u := os.Getenv(EnvURL); u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "postgres" && pu.Scheme != "postgresql") {
			fmt.Fprintf(os.Stderr, "pgtest: %s must be a postgres:// URL\n", EnvURL)
			return 1
		}
		adminURL, external = u, true
		defer dropTemplate()
		return m.Run()
	}

	// The cluster starts with the first test that asks for a database:
	// a test binary that needs none (say, a fuzzing worker, which runs
	// TestMain too) starts none, and handles no signals.
	defer func() {
		if stopCluster != nil {
			stopCluster()
		}
	}()
	return m.Run()
}

var (
	mainRan     bool // Main runs the tests (set before any test runs)
	external    bool // EnvURL names the server: no cluster to start
	clusterOnce sync.Once
	clusterErr  error
	stopCluster func() // set once the cluster runs
)

// startCluster starts the throwaway cluster, once per test binary.
func startCluster() error {
	if external {
		return nil
	}
	clusterOnce.Do(func() {
		base, err := os.MkdirTemp("", "fairway-pgtest-")
		if err != nil {
			clusterErr = err
			return
		}
		// When tests run as root, PostgreSQL runs as the postgres user, which must be
		// able to enter base (os.MkdirTemp makes it 0700).
		if err := os.Chmod(base, 0o755); err != nil {
			_ = os.RemoveAll(base)
			clusterErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		srv, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(base, "pg"), Database: "postgres"})
		cancel()
		if err != nil {
			_ = os.RemoveAll(base)
			clusterErr = fmt.Errorf("cannot start PostgreSQL for tests (or set %s): %w", EnvURL, err)
			return
		}
		stop := sync.OnceFunc(func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			}
			_ = os.RemoveAll(base)
		})
		stopCluster = stop
		// pg_ctl detaches the server, so an interrupted test binary would leave it running.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-sigs
			stop()
			os.Exit(1)
		}()
		adminURL = srv.URLFor("postgres")
	})
	return clusterErr
}

// prepareTemplate creates the template database and runs the registered prepare function on it.
func prepareTemplate() error {
	if prepareTpl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := prefix + "_template"
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	if err := prepareTpl(ctx, urlFor(name)); err != nil {
		return err
	}
	// CREATE DATABASE ... TEMPLATE fails while anyone is connected to the
	// template, so forbid new connections and end any that prepare left open.
	if err := adminExec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return err
	}
	if err := adminExec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		return err
	}
	tplName = name
	return nil
}

// dropTemplate drops the template database from a server that outlives the test binary.
func dropTemplate() {
	if tplName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{tplName}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
}

// adminExec runs one statement on a new connection to the admin database.
func adminExec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// urlFor returns adminURL with its database replaced by db.
func urlFor(db string) string {
	u, _ := url.Parse(adminURL) // checked in run
	u.Path = "/" + db
	u.RawPath = ""
	return u.String()
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// sanitize turns a test name into something readable inside a database name.
func sanitize(name string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(name), "_"), "_")
}
