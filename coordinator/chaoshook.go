//go:build !fairwaychaos

package coordinator

import "log/slog"

// The fault hooks of the fault-injection suite (internal/chaos) do nothing
// here: they are compiled in only with the build tag fairwaychaos (see
// chaoshook_fairwaychaos.go), which production builds never have, so no
// environment variable can make a production coordinator kill itself.

// chaosHooks says whether this build has the fault hooks.
const chaosHooks = false

// chaosKillEnv is the variable that arms the kill hook in a fairwaychaos build.
const chaosKillEnv = "FAIRWAYCHAOS_KILL_AFTER_INGEST_COMMIT"

func chaosAfterIngestCommit(*slog.Logger, int) {}

// The journal's hooks (see chaoshook_fairwaychaos.go), no-ops here.
func chaosAfterClaimCommit(*slog.Logger, int) {}

func chaosBeforeClaimAppend(*slog.Logger) {}
