//go:build windows

package chaos

import (
	"errors"
	"os"
	"syscall"

	"github.com/fairwayhq/fairway/internal/proc"
)

// The fault suite runs on Linux (network namespaces, tmpfs, /proc, root);
// these let the package build on Windows, where it is never run.

// userIDs are a user's numeric ids (the postgres user's, when we are root).
type userIDs struct{ uid, gid uint32 }

// sigkill terminates pid (TerminateProcess).
func sigkill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// signalable says whether pid runs.
func signalable(pid int) bool { return proc.Alive(pid) }

// runAs is nil: Windows never runs as root (Geteuid is -1), so the suite
// never switches users there.
func runAs(userIDs) *syscall.SysProcAttr { return nil }

// sigcont: no process is stopped on Windows.
func sigcont(int) error { return errors.New("no SIGCONT on Windows") }
