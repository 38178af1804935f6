package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/jackc/pgx/v5"
)

// The superuser of a cluster started here needs a password, over TCP and
// over the unix socket: without one any local user could connect as a
// superuser and run programs as the server's OS user (COPY … TO PROGRAM).
// The password is random and kept in a file only its owner can read.

// hba is the pg_hba.conf given to a cluster that older versions made with
// trust authentication; %s is the password file.
const hba = `# Written by Fairway (internal/pgserver): every connection needs a password;
# the superuser's is in %s.
# TYPE  DATABASE  USER  ADDRESS       METHOD
local   all       all                 scram-sha-256
host    all       all   127.0.0.1/32  scram-sha-256
host    all       all   ::1/128       scram-sha-256
`

// newPassword makes a random password for the superuser and writes it to
// s.pwFile, mode 0600 (owned by the server's OS user when we are root, so
// that initdb can read it).
func (s *Server) newPassword() error {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	password := hex.EncodeToString(b)
	if err := secret.WriteFile(s.pwFile, []byte(password+"\n")); err != nil {
		return fmt.Errorf("pgserver: writing the superuser's password: %w", err)
	}
	if err := s.chown(s.pwFile); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	s.password = password
	return nil
}

// readPassword reads the superuser's password of an existing cluster, and
// tells whether the cluster still trusts local connections; such a cluster
// (made by an older version) gets a new password if it has none.
func (s *Server) readPassword() (trusting bool, err error) {
	trusting, err = s.hbaTrusts()
	if err != nil {
		return false, err
	}
	data, err := os.ReadFile(s.pwFile)
	switch {
	case err == nil:
		s.password = strings.TrimSpace(string(data))
		return trusting, nil
	case errors.Is(err, fs.ErrNotExist) && trusting:
		return true, s.newPassword()
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("pgserver: the PostgreSQL cluster in %s needs the superuser's password, which %s no longer holds: restore that file, or remove %s (and with it the cluster's data) to start with a new cluster", s.dir, s.pwFile, s.dir)
	}
	return false, fmt.Errorf("pgserver: reading the superuser's password: %w", err)
}

// hbaTrusts tells whether the cluster's pg_hba.conf lets any connection in
// without a password.
func (s *Server) hbaTrusts() (bool, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, "pg_hba.conf"))
	if err != nil {
		return false, fmt.Errorf("pgserver: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == "trust" {
			return true, nil
		}
	}
	return false, nil
}

// requirePassword upgrades a running cluster that trusts local connections:
// it gives the superuser its password, replaces pg_hba.conf and restarts
// the server.
func (s *Server) requirePassword(ctx context.Context, opts Options) error {
	s.log.Warn("this PostgreSQL cluster, made by an older Fairway, lets every local user in as its superuser without a password: giving it one",
		"dir", s.dir, "password_file", s.pwFile)
	conn, err := pgx.Connect(ctx, s.URLFor("postgres")) // trust ignores the password
	if err != nil {
		return fmt.Errorf("pgserver: connect: %w", err)
	}
	_, err = conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'")
	if err == nil {
		// The password is hex: nothing to quote.
		_, err = conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{superuser}.Sanitize()+" PASSWORD '"+s.password+"'")
	}
	_ = conn.Close(context.Background())
	if err != nil {
		return fmt.Errorf("pgserver: setting the superuser's password: %w", err)
	}
	if _, err := s.run(ctx, "pg_ctl", "-D", s.dir, "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("pgserver: stop PostgreSQL in %s: %w", s.dir, err)
	}
	// The file exists, so it keeps its owner (the server's OS user).
	if err := os.WriteFile(filepath.Join(s.dir, "pg_hba.conf"), fmt.Appendf(nil, hba, s.pwFile), 0o600); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	return s.start(ctx, opts)
}
