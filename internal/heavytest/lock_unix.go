//go:build unix

package heavytest

import "syscall"

// lock takes an exclusive lock on the file at path, calling waiting first
// if another process holds it. The descriptor is never closed (a raw one:
// no finalizer closes it), so the lock lasts as long as the process.
func lock(path string, waiting func()) (waited bool, err error) {
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return false, err
	}
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		return false, nil
	}
	waiting()
	return true, syscall.Flock(fd, syscall.LOCK_EX)
}
