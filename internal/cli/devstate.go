package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/proc"
	"github.com/fairwayhq/fairway/internal/secret"
)

// devStateName is the file in the dev dir where a running fairway dev
// records where it listens, so that the other commands given the same dev
// dir find it on whatever port it runs (see followDev).
const devStateName = "dev.json"

// devState is the content of <dev-dir>/dev.json. It holds no secret: with
// --tenants, the credentials are the files in <dev-dir>/creds.
type devState struct {
	PID     int       `json:"pid"`      // the fairway dev process
	NATSURL string    `json:"nats_url"` // its embedded NATS server's client URL
	Started time.Time `json:"started"`
}

// recordDev writes dev.json in dir for this process, whose embedded NATS
// listens at natsURL, and returns the function that removes it (call it
// when the NATS server stops). A failure to write is logged, not fatal:
// the other commands then need --nats-url.
func (e *env) recordDev(dir, natsURL string) (remove func()) {
	st := devState{PID: os.Getpid(), NATSURL: natsURL, Started: time.Now().UTC().Truncate(time.Second)}
	path := filepath.Join(dir, devStateName)
	if err := writeDevState(path, st); err != nil {
		e.log.Warn("cannot record where fairway dev listens: other commands need --nats-url", "file", path, "error", err)
		return func() {}
	}
	e.log.Debug("recorded where fairway dev listens", "file", path, "nats_url", natsURL)
	return func() {
		// Only our own record: another dev of this dir may have replaced it.
		if cur, err := readDevState(path); err == nil && cur.PID == st.PID && cur.NATSURL == st.NATSURL && cur.Started.Equal(st.Started) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				e.log.Warn("cannot remove the record of fairway dev", "file", path, "error", err)
			}
		}
	}
}

// writeDevState writes st to path atomically (a temporary file in the same
// directory, renamed over it), mode 0600.
func writeDevState(path string, st devState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+devStateName+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // fails once renamed: nothing left to remove
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readDevState reads the record at path.
func readDevState(path string) (devState, error) {
	var st devState
	data, err := os.ReadFile(path) //nolint:gosec // G304: dev.json in the user's dev dir
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	if st.PID <= 0 || st.NATSURL == "" {
		return st, fmt.Errorf("%s: no pid or nats_url", path)
	}
	return st, nil
}

// processAlive reports whether a process with this pid exists (on Unix,
// signal 0: EPERM means it exists but belongs to another user).
func processAlive(pid int) bool { return proc.Alive(pid) }

// followDev points nats.url at the NATS server of the fairway dev recorded
// in <dev.dir>/dev.json, when the user did not set nats.url (its source is
// the default) and the recorded process is alive. A stale record (its
// process gone) is ignored. The source of nats.url becomes
// config.SourceDevDir, which config print shows.
func followDev(cfg *config.Config, log *slog.Logger) error {
	if src := cfg.Source("nats.url"); src != config.SourceDefault {
		log.Debug("nats.url set explicitly: not looking for a running fairway dev", "nats_url", secret.Mask(cfg.NATS.URL), "source", src)
		return nil
	}
	path := filepath.Join(cfg.Dev.Dir, devStateName)
	st, err := readDevState(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Debug("nats.url: the default, no fairway dev recorded", "nats_url", cfg.NATS.URL, "file", path)
		return nil
	case err != nil:
		log.Warn("ignoring the record of fairway dev: cannot read it", "file", path, "error", err)
		return nil
	case !processAlive(st.PID):
		log.Debug("ignoring a stale record of fairway dev: its process is gone", "file", path, "pid", st.PID, "dev_nats_url", st.NATSURL)
		return nil
	}
	if err := cfg.SetFrom("nats.url", st.NATSURL, config.SourceDevDir); err != nil {
		return fmt.Errorf("%w (recorded in %s by fairway dev, pid %d; pass --nats-url)", err, path, st.PID)
	}
	log.Debug("nats.url from the running fairway dev", "nats_url", st.NATSURL, "file", path, "pid", st.PID)
	return nil
}
