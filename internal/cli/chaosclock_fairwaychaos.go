//go:build fairwaychaos

package cli

import (
	"log/slog"
	"os"
	"strings"
	"time"
)

// Fault hooks of the fault-injection suite (internal/chaos), compiled only
// with the build tag fairwaychaos, which that suite gives the fairway binary
// it runs; production builds get the no-ops of chaosclock.go.

// chaosHooks says whether this build has the fault hooks.
const chaosHooks = true

// chaosClockEnv names the file of the host clock's offset.
const chaosClockEnv = "FAIRWAYCHAOS_CLOCK_OFFSET_FILE"

// chaosClock: with FAIRWAYCHAOS_CLOCK_OFFSET_FILE set, the coordinator's
// host clock (coordinator.Config.HostClock) is the real one plus the
// duration in that file (e.g. 1h), read at every call so that the suite
// can step it (logged, so that the suite sees the hook armed). Nil, the
// real clock, otherwise.
func chaosClock(log *slog.Logger) func() time.Time {
	file := os.Getenv(chaosClockEnv)
	if file == "" {
		return nil
	}
	log.Warn("chaos: host clock offset by the duration in "+chaosClockEnv, "file", file)
	return func() time.Time {
		b, _ := os.ReadFile(file) //nolint:gosec // G304: the fault suite names the file
		off, _ := time.ParseDuration(strings.TrimSpace(string(b)))
		return time.Now().Add(off)
	}
}
