package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/jackc/pgx/v5"
)

// The failover scenario's executor: a trickle, so that the backlog is
// still there when the leader is killed.
const (
	failoverSlots   = 10
	failoverJobTime = 10 * time.Millisecond
	// failoverArgs is the size of each job's arguments (issue 31's memory
	// condition is stated for 200-byte arguments).
	failoverArgs = 200
)

// failover: the journal's leader killed with opts.Jobs jobs waiting (issue
// 31, condition 4). Two coordinators on the journal engine, each in its
// own process; the first leads. The jobs are submitted, an executor of
// 10 slots runs them (10 ms each) until dispatch runs steadily, and the
// leader is killed (SIGKILL). Figures: the stall in the starts after the
// kill (stall_ms: the executor runs what it held first) and when it ended
// (resume_ms, from the kill), the jobs still waiting then, and the peak
// memory of the coordinator that took over, which held the partition's
// state as a follower (follower_rss_mib: the leader's memory for that many
// waiting jobs).
func failover(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.CoordinatorCommand) == 0 {
		return nil, errors.New("failover kills a coordinator: run the coordinators in their own processes (without --in-process)")
	}
	starts := make(chan start, 1<<16)
	work := func(ctx context.Context, job *executor.Job) error {
		now := time.Now()
		select {
		case starts <- start{at: now, partition: partition.Of(job.Group, max(opts.Partitions, 1))}:
		default:
		}
		t := time.NewTimer(failoverJobTime)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}
	s, err := newSystem(ctx, opts, systemConfig{slots: failoverSlots, noExecutors: true})
	if err != nil {
		return nil, err
	}
	defer s.close()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	leads := func() (string, error) { return journal.LeaseHolder(ctx, conn, 0) }
	first, err := waitFor(ctx, "the first coordinator to lead", leads)
	if err != nil {
		return nil, err
	}
	leader := s.coordPid
	if err := s.startCoordinatorProcess(ctx); err != nil {
		return nil, err
	}
	follower := s.coordPid
	args := []byte(`{"pad":"` + strings.Repeat("x", failoverArgs-len(`{"pad":""}`)) + `"}`)
	subs := withArgs(submissions(opts.Jobs, func(i int) string { return fmt.Sprintf("g%d", i%10) }))
	for i := range subs {
		subs[i].Args = args
	}
	opts.Logger.Info("bench: submitting the jobs that wait", "jobs", len(subs))
	began := time.Now()
	if _, err := s.client.SubmitMany(ctx, subs); err != nil {
		return nil, err
	}
	opts.Logger.Info("bench: submitted; starting the executor", "jobs", len(subs), "in", time.Since(began).Round(time.Millisecond).String())
	if err := s.startExecutors(ctx, systemConfig{slots: failoverSlots, handler: work}); err != nil {
		return nil, err
	}
	// Dispatch runs steadily: a few hundred jobs started.
	for range 300 {
		select {
		case <-starts:
		case <-time.After(time.Minute):
			return nil, errors.New("no job started within a minute of the executor's start")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	opts.Logger.Info("bench: dispatch runs; killing the leader", "pid", leader)
	s.killed = leader
	p, err := os.FindProcess(leader)
	if err == nil {
		err = p.Kill() // SIGKILL: it gives nothing up
	}
	if err != nil {
		return nil, fmt.Errorf("killing the leader (pid %d): %w", leader, err)
	}
	killed := time.Now()
	waiting := opts.Jobs - int(s.ran.Load())
	opts.Logger.Info("bench: the leader is killed", "pid", leader, "waiting", waiting)
	// The executor runs what it held at the kill (its slots and prefetch)
	// for a few job times; then starts stop until the new leader hands
	// out jobs. The stall is the longest wait between two starts from the
	// kill until a second after it, once the lease changed hands.
	prev, stallFrom, stallTo := killed, killed, killed
	var after []start // the starts after the kill
	deadline := time.After(time.Minute)
	for resumed := false; ; {
		var quiet <-chan time.Time // a second after the stall: the measure is done
		if resumed {
			quiet = time.After(time.Until(stallTo.Add(time.Second)))
		}
		select {
		case st := <-starts:
			at := st.at
			if !at.After(killed) {
				continue
			}
			after = append(after, st)
			if at.Sub(prev) > stallTo.Sub(stallFrom) {
				stallFrom, stallTo, resumed = prev, at, true
			}
			prev = at
			continue
		case <-quiet:
			// Unless the lease changed hands, the starts so far were of
			// the jobs the executor held at the kill.
			holder, err := leads()
			if err != nil {
				return nil, err
			}
			if holder == "" || holder == first {
				resumed = false
				continue
			}
		case <-deadline:
			return nil, errors.New("dispatch did not resume within a minute of the leader's kill")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	r := &Result{Scenario: "failover", Jobs: opts.Jobs}
	r.add("resume_ms", ms(stallTo.Sub(killed)))
	if opts.Partitions > 1 {
		// Every partition's first start from the resume on: the new
		// leader takes partition 0's lease, then the others' at once
		// (journal.Leader.Contend).
		first := map[int]time.Time{}
		for _, st := range after {
			if !st.at.Before(stallTo) && first[st.partition].IsZero() {
				first[st.partition] = st.at
			}
		}
		if len(first) < opts.Partitions {
			return nil, fmt.Errorf("after the resume, jobs of %d of %d partitions started within a second", len(first), opts.Partitions)
		}
		var last time.Time
		for _, at := range first {
			if at.After(last) {
				last = at
			}
		}
		r.add("resume_ms_every_partition", ms(last.Sub(killed)))
	}
	r.add("stall_ms", ms(stallTo.Sub(stallFrom)))
	r.add("waiting_at_kill", waiting)
	r.add("follower_rss_mib", peakRSSMiB(follower))
	return r, nil
}

// start is a job's start in the failover scenario: when, and its
// group's partition.
type start struct {
	at        time.Time
	partition int
}

// waitFor polls f every 50 ms until it returns something, for a minute.
func waitFor(ctx context.Context, what string, f func() (string, error)) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := f()
		if err != nil || v != "" {
			return v, err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("waited a minute for %s", what)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
