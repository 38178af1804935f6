package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// devLockName is the file in the dev dir that a running fairway dev holds
// locked from before it starts anything until everything has stopped: a
// second fairway dev on the same directory would otherwise start NATS on
// the first one's data before it found PostgreSQL running. The lock is
// the operating system's (flock, LockFileEx), so it goes with the process
// however that ends: a lock file left behind by a crash locks nothing.
const devLockName = "dev.lock"

// devLockRecord is what the holder of the lock writes into the lock file,
// so that a second fairway dev can say which process holds it.
type devLockRecord struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// errDevDirBusy is the error of a fairway dev whose dev dir another holds.
var errDevDirBusy = errors.New("in use by another fairway dev")

// lockDevDir locks dir (which exists) for this fairway dev and returns the
// function that unlocks it (call it once everything has stopped). When
// another process holds it, the error says which and what to do.
func lockDevDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, devLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G304: the lock file in the user's dev dir
	if err != nil {
		return nil, fmt.Errorf("locking the dev dir: %w", err)
	}
	held, err := tryLockFile(f)
	if err != nil || held {
		_ = f.Close() // opened only to lock
		if err != nil {
			return nil, fmt.Errorf("locking the dev dir: %s: %w", path, err)
		}
		return nil, devDirBusy(dir)
	}
	rec, _ := json.Marshal(devLockRecord{PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second)})
	// Best effort: the lock is what counts; the record only names its holder.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(rec, '\n'), 0)
	}
	return func() {
		_ = unlockFile(f)
		_ = f.Close()
	}, nil
}

// devDirBusy describes the fairway dev that holds dir: its pid (from the
// lock file) and where its NATS listens (from dev.json), and what to do.
func devDirBusy(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var holder devLockRecord
	if data, err := os.ReadFile(filepath.Join(dir, devLockName)); err == nil { //nolint:gosec // G304: the dev dir's own lock file
		_ = json.Unmarshal(data, &holder)
	}
	var about []string
	if holder.PID > 0 {
		about = append(about, fmt.Sprintf("pid %d", holder.PID))
	}
	if st, err := readDevState(filepath.Join(dir, devStateName)); err == nil && (holder.PID <= 0 || st.PID == holder.PID) {
		if holder.PID <= 0 {
			about = append(about, fmt.Sprintf("pid %d", st.PID))
			holder.PID = st.PID
		}
		about = append(about, "NATS at "+st.NATSURL)
	}
	if !holder.Started.IsZero() {
		about = append(about, "started "+holder.Started.Local().Format(time.DateTime))
	}
	who := ""
	if len(about) > 0 {
		who = " (" + strings.Join(about, ", ") + ")"
	}
	stop := "Stop it first (Ctrl-C where it runs)"
	if holder.PID > 0 {
		stop = fmt.Sprintf("Stop it first (Ctrl-C where it runs, or kill %d)", holder.PID)
	}
	return fmt.Errorf("dev dir %s is %w%s; nothing was started. %s, or start this one with another --dev-dir (and another --nats-addr and --pg-port). "+
		"To use the running one, run the other commands with --dev-dir %s",
		abs, errDevDirBusy, who, stop, abs)
}
