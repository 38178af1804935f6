package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// killPartitionsLeaderPartitions is the partitions of partitionKillLeader.
const killPartitionsLeaderPartitions = 4

// leadsLine is the message a coordinator logs when it comes to lead a
// partition (journal.Leader).
const leadsLine = "this coordinator leads journal partition now"

// partitionKillLeader (issue 34): four partitions, in the suite's
// database; one coordinator leads them all (the leader of partition 0
// takes the others). That coordinator is SIGKILLed under load, and
// started again 2 s later. The other must take every partition within
// their lease, and the dispatch go on from it: nothing lost, nothing run
// twice, and the jobs in flight at the kill final within the recovery the
// suite reports.
func partitionKillLeader(base ClusterOptions) Scenario {
	opts := base
	env := []string{"FAIRWAY_DATABASE_PARTITIONS=" + strconv.Itoa(killPartitionsLeaderPartitions)}
	opts.Coordinator = func(int) ProcOptions { return ProcOptions{Env: env} }
	return Scenario{
		Name: "partition-kill-leader", Cluster: opts,
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			for i := range repeats {
				if err := between(ctx, time.Second); err != nil {
					return err
				}
				victim, err := leaderOf(r.C.Coordinators, 0)
				if err != nil {
					return err
				}
				r.fault()
				killed := time.Now()
				victim.Kill()
				var others []*Proc
				for _, p := range r.C.Coordinators {
					if p != victim {
						others = append(others, p)
					}
				}
				took, err := ledSince(ctx, others, killed, killPartitionsLeaderPartitions)
				if err != nil {
					return err
				}
				r.note("%s, the leader of the %d partitions, SIGKILLed; %s led them all %s after (fault %d)",
					victim.Name, killPartitionsLeaderPartitions, took.by.Name, took.at.Sub(killed).Round(time.Millisecond), i+1)
				if err := between(ctx, 2*time.Second); err != nil {
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

// leadLine is a coordinator's log line saying it came to lead a
// partition.
type leadLine struct {
	by        *Proc
	at        time.Time
	partition int
}

// leadLines are the lines of procs' logs saying they came to lead a
// partition, each with its time (the logs are JSON: FAIRWAY_LOG_FORMAT).
func leadLines(procs []*Proc) []leadLine {
	var out []leadLine
	for _, p := range procs {
		f, err := os.Open(p.log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), leadsLine) {
				continue
			}
			var line struct {
				Msg       string    `json:"msg"`
				Time      time.Time `json:"time"`
				Partition *int      `json:"partition"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != leadsLine || line.Partition == nil {
				continue
			}
			out = append(out, leadLine{by: p, at: line.Time, partition: *line.Partition})
		}
		_ = f.Close()
	}
	return out
}

// leaderOf is the coordinator of procs that last came to lead partition
// (the latest line of leadLines: whoever takes a lease after another
// holds it now).
func leaderOf(procs []*Proc, partition int) (*Proc, error) {
	var last *leadLine
	for _, l := range leadLines(procs) {
		if l.partition == partition && (last == nil || l.at.After(last.at)) {
			last = &l
		}
	}
	if last == nil {
		return nil, fmt.Errorf("no coordinator says it leads partition %d (%q in their logs)", partition, leadsLine)
	}
	return last.by, nil
}

// ledSince waits until one of procs says it leads every one of the
// partitions in lines logged after since, and returns the last of those
// lines.
func ledSince(ctx context.Context, procs []*Proc, since time.Time, partitions int) (leadLine, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		latest := map[*Proc]map[int]leadLine{}
		for _, l := range leadLines(procs) {
			if l.at.Before(since) {
				continue
			}
			if latest[l.by] == nil {
				latest[l.by] = map[int]leadLine{}
			}
			latest[l.by][l.partition] = l
		}
		for _, byPart := range latest {
			if len(byPart) < partitions {
				continue
			}
			var last leadLine
			for _, l := range byPart {
				if l.at.After(last.at) {
					last = l
				}
			}
			return last, nil
		}
		select {
		case <-ctx.Done():
			return leadLine{}, fmt.Errorf("waiting for a coordinator to lead the %d partitions after the kill: %w", partitions, ctx.Err())
		case <-tick.C:
		}
	}
}
