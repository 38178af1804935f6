//go:build windows

package cli

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockRange is where on the file the lock lies: a byte 4 GiB in, past the
// holder's record at its start, which other processes must still read
// (on Windows, a locked range cannot be read through another handle).
var lockRange = windows.Overlapped{OffsetHigh: 1}

// tryLockFile takes an exclusive lock on f without waiting (LockFileEx:
// a second handle on the same file, in this process or another, is
// refused, and the lock goes with the process). held says another holds
// it.
func tryLockFile(f *os.File) (held bool, err error) {
	ol := lockRange
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}

// unlockFile releases the lock of tryLockFile.
func unlockFile(f *os.File) error {
	ol := lockRange
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
