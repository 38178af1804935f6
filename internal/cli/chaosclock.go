//go:build !fairwaychaos

package cli

import (
	"log/slog"
	"time"
)

// The fault hooks of the fault-injection suite (internal/chaos) do nothing
// here: they are compiled in only with the build tag fairwaychaos (see
// chaosclock_fairwaychaos.go), which production builds never have.

// chaosHooks says whether this build has the fault hooks.
const chaosHooks = false

// chaosClockEnv names the file of the host clock's offset in a fairwaychaos build.
const chaosClockEnv = "FAIRWAYCHAOS_CLOCK_OFFSET_FILE"

// chaosClock is nil: the coordinator's host clock is the real one.
func chaosClock(*slog.Logger) func() time.Time { return nil }
