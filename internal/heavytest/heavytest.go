// Package heavytest lets the test suites that measure victims' delays
// under attack or faults (internal/isolation, internal/chaos) take turns
// rather than run at once: `go test ./...` runs two packages at a time on
// two cores, and one suite's floods or processes made the other's bounds
// (an admin's request within 1 s during a flood) measure the machine
// rather than Fairway. Other packages still run beside either.
package heavytest

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Exclusive waits until no other heavy suite runs on this machine, then
// holds the turn until the test binary exits (the lock goes with the
// process). Call it first in TestMain.
func Exclusive() {
	began := time.Now()
	waited, err := lock(filepath.Join(os.TempDir(), "fairway-heavy-tests.lock"), func() {
		fmt.Fprintln(os.Stderr, "heavytest: waiting for another heavy test suite (isolation or chaos) to finish")
	})
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "heavytest: %v; running without waiting for the other heavy suites\n", err)
	case waited:
		fmt.Fprintf(os.Stderr, "heavytest: waited %s\n", time.Since(began).Round(time.Second))
	}
}
