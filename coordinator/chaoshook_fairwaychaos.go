//go:build fairwaychaos

package coordinator

import (
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
)

// Fault hooks of the fault-injection suite (internal/chaos), compiled only
// with the build tag fairwaychaos, which that suite gives the fairway binary
// it runs; production builds get the no-ops of chaoshook.go.

// chaosHooks says whether this build has the fault hooks.
const chaosHooks = true

// chaosKillEnv arms the hook: with n, the coordinator SIGKILLs itself right
// after its n-th ingest batch is committed and before the batch is
// acknowledged, the window where a redelivery must not make a second job.
// (Not FAIRWAY_…: the configuration refuses unknown FAIRWAY_ variables.)
const chaosKillEnv = "FAIRWAYCHAOS_KILL_AFTER_INGEST_COMMIT"

var (
	chaosKillAfterCommit, _ = strconv.ParseInt(os.Getenv(chaosKillEnv), 10, 64)
	chaosCommits            atomic.Int64
)

func chaosAfterIngestCommit(log *slog.Logger, stored int) {
	if chaosKillAfterCommit <= 0 || stored == 0 || chaosCommits.Add(1) != chaosKillAfterCommit {
		return
	}
	log.Warn("chaos: killed after an ingest commit, before its ack ("+chaosKillEnv+")", "stored", stored)
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Kill() // SIGKILL on Unix
	}
	select {} // never acknowledge
}
