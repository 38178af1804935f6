//go:build unix

package pgserver

import "syscall"

// owner is the user PostgreSQL's commands run as when Fairway runs as root.
type owner struct{ uid, gid uint32 }

// runAs makes commands run as o. Groups is empty, so the child also drops
// root's supplementary groups.
func runAs(o owner) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid}}
}
