// Package pgserver starts and stops a PostgreSQL cluster of Fairway's own from the PostgreSQL binaries installed on the machine.
package pgserver

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway/internal/proc"
	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned (wrapped) when initdb, pg_ctl and postgres cannot be found.
var ErrNoBinaries = errors.New("PostgreSQL binaries (initdb, pg_ctl, postgres) not found: install PostgreSQL (e.g. `apt-get install postgresql`) or pass --database-url")

const (
	superuser = "fairway"  // superuser created by initdb; also the user in URLs
	osUser    = "postgres" // unprivileged OS user the server runs as when Fairway runs as root
	logName   = "postgres.log"
	// maxSocketPath is the longest unix socket path PostgreSQL accepts (sizeof(sun_path)-1 on Linux).
	maxSocketPath = 107
)

// defaultSettings are passed to the server unless Options.Settings overrides them.
// Durability settings (fsync, synchronous_commit, full_page_writes) keep PostgreSQL's defaults on purpose.
var defaultSettings = map[string]string{
	"max_connections": "200",
	"shared_buffers":  "128MB",
}

// Options configures Start.
type Options struct {
	// Dir is the data directory. A new cluster is created in it with initdb when it
	// has no PG_VERSION file; it must then be empty or missing.
	Dir string
	// Port is the TCP port on 127.0.0.1 to listen on; 0 picks a free one.
	Port int
	// Database is created if missing; it defaults to "fairway".
	Database string
	// Logger receives progress logs; nil discards them.
	Logger *slog.Logger
	// Settings are extra postgresql.conf settings, passed as -c key=value. They
	// cannot change the port, listen_addresses or unix_socket_directories.
	// TLS, for example: ssl=on, ssl_cert_file and ssl_key_file (a key file
	// the server's user owns, mode 0600).
	Settings map[string]string
	// HBA, when not nil, replaces pg_hba.conf with these lines at every
	// start, e.g. "hostssl all all 127.0.0.1/32 trust" to refuse
	// connections without TLS. Start's own connection (to create Database)
	// goes to 127.0.0.1 with sslmode=prefer, so the lines must let the
	// superuser in from there. Defaults to the file Start writes: the
	// superuser's password (scram-sha-256) for every connection.
	HBA []string
	// PasswordFile holds the superuser's password (mode 0600): a new cluster
	// gets a random one, and so does a cluster made by an older version,
	// which trusted every local connection. Defaults to Dir + ".password".
	PasswordFile string
}

// Server is a running PostgreSQL cluster started by Start.
type Server struct {
	dir      string
	binDir   string
	port     int
	database string
	log      *slog.Logger
	attr     *syscall.SysProcAttr // runs commands as osUser when we are root; nil otherwise
	owner    *owner               // osUser's ids when attr runs commands as osUser
	pwFile   string
	password string // the superuser's

	mu      sync.Mutex
	stopped bool
}

// Start starts PostgreSQL in opts.Dir, creating the cluster first if needed, and
// creates opts.Database if it does not exist. The server keeps running after the
// calling process exits until Stop is called.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgserver: Options.Dir is required")
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	s := &Server{dir: dir, binDir: binDir, port: opts.Port, database: opts.Database, log: opts.Logger,
		pwFile: cmp.Or(opts.PasswordFile, dir+".password")}
	if s.database == "" {
		s.database = "fairway"
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.setUser(); err != nil {
		return nil, err
	}
	trusting, err := s.initCluster(ctx)
	if err != nil {
		return nil, err
	}
	if opts.HBA != nil {
		// The file exists (initdb wrote it), so it keeps its owner.
		hba := filepath.Join(s.dir, "pg_hba.conf")
		if err := os.WriteFile(hba, []byte(strings.Join(opts.HBA, "\n")+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("pgserver: %w", err)
		}
	}
	if err := s.start(ctx, opts); err != nil {
		return nil, err
	}
	if trusting {
		if err := s.requirePassword(ctx, opts); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	version, err := s.createDatabase(ctx)
	if err != nil {
		_ = s.Stop()
		return nil, err
	}
	s.log.Info("PostgreSQL ready", "dir", s.dir, "port", s.port, "version", version, "database", s.database)
	return s, nil
}

// Port returns the TCP port the server listens on: pass it as Options.Port to
// start the same cluster again on the same port.
func (s *Server) Port() int { return s.port }

// URL returns the connection URL of the server's database.
func (s *Server) URL() string { return s.URLFor(s.database) }

// URLFor returns the connection URL of database db on the server.
func (s *Server) URLFor(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, s.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down with pg_ctl's fast mode, which disconnects clients
// and rolls back their transactions. Calling it again after a successful Stop does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	if _, err := s.run(context.Background(), "pg_ctl", "-D", s.dir, "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("pgserver: stop PostgreSQL in %s: %w", s.dir, err)
	}
	s.stopped = true
	s.log.Info("PostgreSQL stopped", "dir", s.dir)
	return nil
}

// FindBinaries returns the directory holding initdb, pg_ctl and postgres: the
// one pg_ctl on PATH comes from, else the newest /usr/lib/postgresql/*/bin, else
// /usr/local/pgsql/bin. It returns an error wrapping ErrNoBinaries if none has all three.
func FindBinaries() (binDir string, err error) {
	var dirs []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// pg_ctl on PATH is often a symlink; the real binaries live next to its target.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versioned, func(a, b string) int { return cmpVersion(b, a) }) // newest first
	dirs = append(dirs, versioned...)
	dirs = append(dirs, "/usr/local/pgsql/bin")
	for _, d := range dirs {
		if hasBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgserver: %w (looked in $PATH, /usr/lib/postgresql/*/bin and /usr/local/pgsql/bin)", ErrNoBinaries)
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// cmpVersion compares /usr/lib/postgresql/VERSION/bin paths by VERSION ("9.6" < "15").
func cmpVersion(a, b string) int {
	v := func(p string) float64 {
		f, err := strconv.ParseFloat(filepath.Base(filepath.Dir(p)), 64)
		if err != nil {
			return -1
		}
		return f
	}
	switch va, vb := v(a), v(b); {
	case va < vb:
		return -1
	case va > vb:
		return 1
	}
	return 0
}

// setUser arranges for commands to run as osUser when we are root, because
// PostgreSQL refuses to run as root.
func (s *Server) setUser() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(osUser)
	if err != nil {
		return fmt.Errorf("pgserver: PostgreSQL refuses to run as root and there is no %q user to run it as: create one (e.g. `useradd --system %s`) or run Fairway as a non-root user: %w", osUser, osUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("pgserver: user %q: %w", osUser, err)
	}
	s.owner = &owner{uid: uint32(uid), gid: uint32(gid)}
	s.attr = runAs(*s.owner)
	return nil
}

// initCluster creates the data directory and runs initdb unless the cluster
// already exists, in which case it checks that the cluster can be started.
// It reads or makes the superuser's password, and tells whether the
// cluster still trusts local connections (made by an older version).
func (s *Server) initCluster(ctx context.Context) (trusting bool, err error) {
	// 0755: as root, PostgreSQL runs as the postgres user, which must be able to enter the parents.
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o755); err != nil { //nolint:gosec // G301: see above
		return false, fmt.Errorf("pgserver: %w", err)
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("pgserver: %w", err)
	}
	pgVersion, err := os.ReadFile(filepath.Join(s.dir, "PG_VERSION"))
	initialised := err == nil
	if !initialised {
		if entries, err := os.ReadDir(s.dir); err != nil {
			return false, fmt.Errorf("pgserver: %w", err)
		} else if len(entries) > 0 {
			return false, fmt.Errorf("pgserver: %s is not empty but holds no PostgreSQL cluster (no PG_VERSION); remove it or choose another directory", s.dir)
		}
		if err := s.chown(s.dir); err != nil {
			return false, fmt.Errorf("pgserver: %w", err)
		}
	}

	// Running postgres --version as the server's user (with the data directory as
	// working directory) also checks that the user can reach the data directory.
	out, err := s.run(ctx, "postgres", "--version")
	if err != nil {
		if s.attr != nil && errors.Is(err, fs.ErrPermission) {
			return false, fmt.Errorf("pgserver: PostgreSQL runs as user %q, which cannot enter %s: it must own it and be able to search every parent directory (chmod o+x), or run Fairway as a non-root user: %w", osUser, s.dir, err)
		}
		return false, fmt.Errorf("pgserver: %w", err)
	}
	// "postgres (PostgreSQL) 15.13 (Debian 15.13-1)"
	binVersion := ""
	if f := strings.Fields(out); len(f) >= 3 {
		binVersion = f[2]
	}

	if initialised {
		v := strings.TrimSpace(string(pgVersion))
		if !strings.HasPrefix(binVersion, v+".") {
			return false, fmt.Errorf("pgserver: the cluster in %s was created by PostgreSQL %s but the binaries in %s are version %s; install PostgreSQL %s or remove %s", s.dir, v, s.binDir, binVersion, v, s.dir)
		}
		if pid := s.runningPID(); pid != 0 {
			// A live server: its pid file must stay (pg_ctl ignores a stale one).
			return false, fmt.Errorf("pgserver: PostgreSQL already running in %s (pid %d), not started by this process (left by one that was killed?): stop it (kill %d, or pg_ctl stop -D %s as the user that owns it), then start again",
				s.dir, pid, pid, s.dir)
		}
		return s.readPassword()
	}

	s.log.Info("initialising PostgreSQL cluster", "dir", s.dir, "version", binVersion, "bin_dir", s.binDir)
	if err := s.newPassword(); err != nil {
		return false, err
	}
	// The superuser needs its password over TCP and over the unix socket
	// (which is in the data directory, mode 0700, too).
	_, err = s.run(ctx, "initdb", "-D", s.dir, "-U", superuser, "--pwfile="+s.pwFile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C")
	if err != nil {
		return false, fmt.Errorf("pgserver: initialise cluster in %s: %w", s.dir, err)
	}
	return false, nil
}

// runningPID returns the pid in postmaster.pid if that process is alive, else 0.
// A stale pid file is left for pg_ctl, which ignores it.
func (s *Server) runningPID() int {
	data, err := os.ReadFile(filepath.Join(s.dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	if !proc.Alive(pid) {
		return 0
	}
	// After a reboot or container restart the pid may belong to another program.
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) != "postgres" {
		return 0
	}
	return pid
}

// start runs pg_ctl start and waits until the server accepts connections.
func (s *Server) start(ctx context.Context, opts Options) error {
	settings := maps.Clone(defaultSettings)
	maps.Copy(settings, opts.Settings)
	settings["listen_addresses"] = "127.0.0.1"
	socketDir := s.dir
	if len(socketDir+"/.s.PGSQL.65535") > maxSocketPath {
		socketDir = "" // too long for a unix socket path: TCP only
	}
	settings["unix_socket_directories"] = socketDir
	delete(settings, "port")

	for attempt := 1; ; attempt++ {
		if opts.Port == 0 {
			port, err := freePort()
			if err != nil {
				return fmt.Errorf("pgserver: pick a port: %w", err)
			}
			s.port = port
		}
		// pg_ctl hands -o to a shell, so every argument is quoted.
		args := []string{"-p", strconv.Itoa(s.port)}
		for _, k := range slices.Sorted(maps.Keys(settings)) {
			args = append(args, "-c", shellQuote(k+"="+settings[k]))
		}
		logPath := filepath.Join(s.dir, logName)
		_, err := s.run(ctx, "pg_ctl", "-D", s.dir, "-l", logPath, "-w", "-o", strings.Join(args, " "), "start")
		if err == nil {
			return nil
		}
		tail := logTail(logPath, 20)
		// A port picked by freePort may have been taken in the meantime; try another.
		if opts.Port == 0 && attempt < 3 && strings.Contains(tail, "Address already in use") {
			s.log.Warn("PostgreSQL port taken, retrying", "port", s.port)
			continue
		}
		return fmt.Errorf("pgserver: start PostgreSQL in %s on port %d: %w\n--- last lines of %s ---\n%s", s.dir, s.port, err, logPath, tail)
	}
}

// createDatabase creates s.database if missing and returns the server version.
func (s *Server) createDatabase(ctx context.Context) (version string, err error) {
	// sslmode=prefer: TLS when the server has it on (HBA may demand it),
	// unverified, since this only creates a database on our own server.
	conn, err := pgx.Connect(ctx, strings.Replace(s.URLFor("postgres"), "sslmode=disable", "sslmode=prefer", 1))
	if err != nil {
		return "", fmt.Errorf("pgserver: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return "", fmt.Errorf("pgserver: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", s.database).Scan(&exists); err != nil {
		return "", fmt.Errorf("pgserver: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.database}.Sanitize()); err != nil {
			return "", fmt.Errorf("pgserver: create database %q: %w", s.database, err)
		}
	}
	return version, nil
}

// run runs a PostgreSQL binary as the server's user, with the data directory as
// working directory, and returns its combined output.
func (s *Server) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, name), args...) //nolint:gosec // G204: PostgreSQL's own binaries (initdb, pg_ctl, postgres) from FindBinaries
	cmd.Dir = s.dir
	cmd.SysProcAttr = s.attr
	// On cancellation interrupt rather than kill, so that initdb removes a
	// half-created cluster instead of leaving one that looks initialised.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// chown gives path to the server's OS user when commands run as that user
// (we are root); otherwise it does nothing.
func (s *Server) chown(path string) error {
	if s.owner == nil {
		return nil
	}
	return os.Chown(path, int(s.owner.uid), int(s.owner.gid))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }() // only listened on to learn a free port
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the last n lines of the file at path, or a note why it can't.
func logTail(path string, n int) string {
	f, err := os.Open(path) //nolint:gosec // G304: the server's own log, in its data directory
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer func() { _ = f.Close() }() // only read
	const maxRead = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > maxRead {
		_, _ = f.Seek(-maxRead, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
