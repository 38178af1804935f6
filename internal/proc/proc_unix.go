//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// Alive reports whether a process with this pid exists on this host: signal
// 0 is delivered to it, or refused with EPERM (it exists but belongs to
// another user). A pid of 0 or less is never alive: kill would address a
// process group.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
