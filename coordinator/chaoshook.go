package coordinator

import (
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// TEST-ONLY hook of the fault-injection suite (internal/chaos), off unless
// FAIRWAYCHAOS_KILL_AFTER_INGEST_COMMIT is set: with n, the coordinator
// SIGKILLs itself right after its n-th ingest batch is committed and before
// the batch is acknowledged, the window where a redelivery must not make a
// second job. Never set it outside that suite. (Not FAIRWAY_…: the
// configuration refuses unknown FAIRWAY_ variables.)
var (
	chaosKillAfterCommit, _ = strconv.ParseInt(os.Getenv("FAIRWAYCHAOS_KILL_AFTER_INGEST_COMMIT"), 10, 64)
	chaosCommits            atomic.Int64
)

func chaosAfterIngestCommit(log *slog.Logger, stored int) {
	if chaosKillAfterCommit <= 0 || stored == 0 || chaosCommits.Add(1) != chaosKillAfterCommit {
		return
	}
	log.Warn("chaos: killed after an ingest commit, before its ack (FAIRWAYCHAOS_KILL_AFTER_INGEST_COMMIT)", "stored", stored)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never acknowledge
}
