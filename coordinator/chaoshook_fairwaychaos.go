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

// The journal engine's hooks, armed by a file: the variable names a path,
// and the first claim of jobs after the suite creates that file removes
// it (one coordinator wins the removal) and faults. Only the partition's
// leader claims, so the leader faults, whichever coordinator leads.
const (
	// chaosClaimKillEnv: SIGKILL right after a claim's row is committed,
	// before the executor hears of its jobs (the dispatch reply is never
	// sent): they are held in the journal by an attempt nobody runs.
	chaosClaimKillEnv = "FAIRWAYCHAOS_KILL_AFTER_CLAIM_COMMIT"
	// chaosClaimFreezeEnv: SIGSTOP right before a claim's row is appended;
	// the suite resumes the process (SIGCONT) past the lease, and the
	// append must then be refused (a successor leads).
	chaosClaimFreezeEnv = "FAIRWAYCHAOS_FREEZE_BEFORE_CLAIM_APPEND"
)

// chaosArmed says whether the hook of env fires now: its file existed and
// this process removed it.
func chaosArmed(env string) bool {
	path := os.Getenv(env)
	return path != "" && os.Remove(path) == nil
}

func chaosAfterClaimCommit(log *slog.Logger, jobs int) {
	if jobs == 0 || !chaosArmed(chaosClaimKillEnv) {
		return
	}
	log.Warn("chaos: killed after a claim's commit, before its reply ("+chaosClaimKillEnv+")", "jobs", jobs)
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Kill() // SIGKILL on Unix
	}
	select {} // never reply
}

func chaosBeforeClaimAppend(log *slog.Logger) {
	if !chaosArmed(chaosClaimFreezeEnv) {
		return
	}
	log.Warn("chaos: frozen before a claim's append (" + chaosClaimFreezeEnv + ")")
	chaosStopSelf() // until the suite's SIGCONT
	log.Warn("chaos: resumed before a claim's append, trying to commit it")
}
