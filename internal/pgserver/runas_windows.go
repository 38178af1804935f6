//go:build windows

package pgserver

import "syscall"

// owner is the user PostgreSQL's commands run as when Fairway runs as root.
type owner struct{ uid, gid uint32 }

// runAs is never called on Windows: os.Geteuid is -1 there, so setUser
// never switches users (a process cannot take another user's identity
// without that user's token), and PostgreSQL runs as the calling user.
func runAs(owner) *syscall.SysProcAttr { return nil }
