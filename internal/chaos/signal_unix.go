//go:build unix

package chaos

import "syscall"

// userIDs are a user's numeric ids (the postgres user's, when we are root).
type userIDs struct{ uid, gid uint32 }

// sigkill sends SIGKILL to pid.
func sigkill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// signalable says whether signal 0 reaches pid (it exists and is ours).
func signalable(pid int) bool { return syscall.Kill(pid, 0) == nil }

// runAs makes a command run as ids (no supplementary groups).
func runAs(ids userIDs) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ids.uid, Gid: ids.gid}}
}

// sigcont resumes pid, stopped by SIGSTOP.
func sigcont(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
