package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The journal's own fault scenarios (issue 31, condition 4): the
// partition's leader is hit where a claim is written. Its hooks
// (coordinator/chaoshook_fairwaychaos.go) are armed by a file: the suite
// creates it, and the first claim of jobs after that removes it and
// faults, in whichever coordinator leads.

const (
	claimKillEnv   = "FAIRWAYCHAOS_KILL_AFTER_CLAIM_COMMIT"
	claimFreezeEnv = "FAIRWAYCHAOS_FREEZE_BEFORE_CLAIM_APPEND"
)

// journalTTL is the journal lease's length (journal.LeaderConfig's
// default): a leader frozen longer has lost it.
const journalTTL = 1500 * time.Millisecond

// journalScenarios are the journal's own faults: its leader hit where a
// claim is written (every other scenario runs on the journal too).
func journalScenarios() []Scenario {
	base := ClusterOptions{NATSNodes: 1, Coordinators: 2, Executors: 3, PoolSize: 16}
	return []Scenario{journalKillAfterClaimCommit(base), journalFreezeBeforeClaimAppend(base)}
}

// journalCluster is base with env's hook armed by the file at arm in
// every coordinator.
func journalCluster(base ClusterOptions, env, arm string) ClusterOptions {
	opts := base
	opts.Coordinator = func(int) ProcOptions {
		return ProcOptions{Env: []string{env + "=" + arm}}
	}
	return opts
}

// armFile is a path no other scenario uses, for a hook's file.
func armFile(name string) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("fairway-chaos-%s-%d", name, time.Now().UnixNano()))
}

// journalKillAfterClaimCommit: the leader SIGKILLs itself right after a
// claim's row is committed, before the executor hears of its jobs. The
// follower takes over within the lease; the executor asks again under the
// same request id and is handed the jobs the dead leader claimed for it
// (the journal knows them by that id), or they are given back when their
// lease runs out. Nothing lost, nothing run twice.
func journalKillAfterClaimCommit(base ClusterOptions) Scenario {
	arm := armFile("claim-kill")
	const marker = "chaos: killed after a claim's commit"
	return Scenario{
		Name: "journal-kill-leader-mid-claim", Cluster: journalCluster(base, claimKillEnv, arm),
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			defer func() { _ = os.Remove(arm) }() // unarmed if no claim took it
			for i := range repeats {
				if err := os.WriteFile(arm, nil, 0o644); err != nil {
					return err
				}
				victim, err := firstExit(ctx, r.C.Coordinators)
				if err != nil {
					return err
				}
				r.fault()
				code, _ := victim.Wait(0)
				if !strings.Contains(readFile(victim.log), marker) {
					return fmt.Errorf("%s exited (code %d) without the hook's log line: the window was not hit (log: %s)", victim.Name, code, victim.log)
				}
				r.note("%s, the journal's leader, killed itself after a claim's commit, before its reply (fault %d)", victim.Name, i+1)
				if err := between(ctx, time.Second); err != nil {
					return err
				}
				if err := victim.Start(); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// journalFreezeBeforeClaimAppend: the leader stops (SIGSTOP) right before
// it appends a claim's row, and is resumed (SIGCONT) after three times the
// lease, when the follower leads under a higher epoch: the resumed append
// must be refused in its own transaction (the fencing: the scenario waits
// for the coordinator's log of the refusal, and fails without it), and
// the jobs it would have claimed run once, from the successor.
func journalFreezeBeforeClaimAppend(base ClusterOptions) Scenario {
	arm := armFile("claim-freeze")
	const frozen, resumed = "chaos: frozen before a claim's append", "chaos: resumed before a claim's append"
	const refused = "an append was refused" // the coordinator's log of journal.ErrFenced
	return Scenario{
		Name: "journal-freeze-leader-past-lease", Cluster: journalCluster(base, claimFreezeEnv, arm),
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			defer func() { _ = os.Remove(arm) }() // unarmed if no claim took it
			for i := range repeats {
				before := lineCounts(r.C.Coordinators, frozen)
				if err := os.WriteFile(arm, nil, 0o644); err != nil {
					return err
				}
				victim, err := nextLine(ctx, r.C.Coordinators, frozen, before)
				if err != nil {
					return err
				}
				r.fault()
				if err := between(ctx, 3*journalTTL); err != nil { // the freeze: past the lease
					return err
				}
				procs := []*Proc{victim}
				beforeResumed, beforeRefused := lineCounts(procs, resumed), lineCounts(procs, refused)
				if err := sigcont(victim.Pid()); err != nil {
					return fmt.Errorf("resuming %s: %w", victim.Name, err)
				}
				if _, err := nextLine(ctx, procs, resumed, beforeResumed); err != nil {
					return err
				}
				// The append it resumed with is refused: a successor leads.
				refusal, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err = nextLine(refusal, procs, refused, beforeRefused)
				cancel()
				if err != nil {
					return fmt.Errorf("%s resumed, but its claim's append was not refused: %w", victim.Name, err)
				}
				r.note("%s, the journal's leader, was frozen before a claim's append for %s and resumed (fault %d)", victim.Name, 3*journalTTL, i+1)
			}
			return nil
		},
	}
}

// firstExit returns the first of procs to exit.
func firstExit(ctx context.Context, procs []*Proc) (*Proc, error) {
	exited := make(chan *Proc, len(procs))
	for _, p := range procs {
		go func() {
			select {
			case <-p.Done():
				exited <- p
			case <-ctx.Done():
			}
		}()
	}
	select {
	case p := <-exited:
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lineCounts counts line in each of procs' logs.
func lineCounts(procs []*Proc, line string) []int {
	out := make([]int, len(procs))
	for i, p := range procs {
		out[i] = strings.Count(readFile(p.log), line)
	}
	return out
}

// nextLine returns the first of procs whose log holds line more times than
// before (lineCounts). The logs are files the processes' output is copied
// to: read every 20 ms.
func nextLine(ctx context.Context, procs []*Proc, line string, before []int) (*Proc, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, p := range procs {
			if strings.Count(readFile(p.log), line) > before[i] {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %q in the coordinators' logs: %w", line, ctx.Err())
		case <-tick.C:
		}
	}
}
