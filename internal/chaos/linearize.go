package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// Reads of jobs during a fault, checked for linearizability (issue 31,
// condition 1). Readers ask the API for jobs the workload submitted
// (through NATS: whichever coordinator answers) while the faults happen,
// and record what each read said and when it was asked and answered. A
// job's state only moves forward along its life (its attempt never goes
// back, and within an attempt it is claimed, runs, then ends or waits
// again), a job once seen never disappears, and a final state is final:
// so the reads of one job are linearizable if and only if some order of
// them, agreeing with real time (a read answered before another was asked
// comes first), sees the job move only forward. A coordinator that
// answers from a state older than one another read already saw (a stale
// follower, a deposed leader) breaks it. Porcupine
// (github.com/anishathalye/porcupine) searches for that order, job by
// job.

// jobRead is a read's input: the job read.
type jobRead struct{ id string }

// observation is what a read of a job said: absent (not stored yet: a
// submission is acknowledged by JetStream before a coordinator stores
// it), or its state and attempt.
type observation struct {
	absent  bool
	state   fairway.State
	attempt int
}

// progress orders observations of a job along its life: by attempt, then
// claimed, running, waiting again (after the attempt), ended. absent
// comes before all.
func (o observation) progress() [2]int {
	if o.absent {
		return [2]int{-1, 0}
	}
	phase := 3 // pending, waiting, stuck: after the attempt it counts (0 before the first)
	switch {
	case o.state == fairway.StateScheduled:
		phase = 1
	case o.state == fairway.StateRunning:
		phase = 2
	case o.state.Final():
		phase = 4
	}
	return [2]int{o.attempt, phase}
}

// jobModel is the model of one job's reads: the state is the last
// observation a linearization has made. givenBack says whether the
// job's attempt was released by its executor without counting (a second
// SIGTERM, graceful-shutdown): the job then waits again under the number
// before, so a read may see it go from attempt n, claimed or running, to
// waiting under n-1, for the attempts givenBack names only (nil: none).
func jobModel(givenBack func(id string, attempt int) bool) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byJob := map[string][]porcupine.Operation{}
			for _, op := range history {
				id := op.Input.(jobRead).id
				byJob[id] = append(byJob[id], op)
			}
			out := make([][]porcupine.Operation, 0, len(byJob))
			for _, ops := range byJob {
				out = append(out, ops)
			}
			return out
		},
		Init: func() any { return observation{absent: true} },
		Step: func(state, input, output any) (bool, any) {
			last, seen := state.(observation), output.(observation)
			switch {
			case !last.absent && seen.absent:
				return false, state // stored jobs do not vanish
			case last.state.Final() && seen != last:
				return false, state // a final state is final
			case givenBack != nil && last.held() && seen.waiting() && seen.attempt == last.attempt-1 &&
				givenBack(input.(jobRead).id, last.attempt):
				return true, seen
			}
			p, q := last.progress(), seen.progress()
			if c := cmp.Compare(q[0], p[0]); c < 0 || c == 0 && q[1] < p[1] {
				return false, state
			}
			return true, seen
		},
		DescribeOperation: describeRead,
	}
}

// describeRead says what one read of a job saw.
func describeRead(input, output any) string {
	o := output.(observation)
	if o.absent {
		return input.(jobRead).id + ": absent"
	}
	return fmt.Sprintf("%s: %s (attempt %d)", input.(jobRead).id, o.state, o.attempt)
}

// held says the observation saw the job claimed or running.
func (o observation) held() bool {
	return !o.absent && (o.state == fairway.StateScheduled || o.state == fairway.StateRunning)
}

// waiting says the observation saw the job wait for a claim.
func (o observation) waiting() bool { return !o.absent && o.state == fairway.StateWaiting }

// readers read random jobs among those submitted, from several clients at
// once, until stopped.
type readers struct {
	client *events.Client
	jobs   func() []submittedJob // the jobs acknowledged so far
	start  time.Time

	mu     sync.Mutex
	ops    []porcupine.Operation
	failed int // reads that got no answer (an outage): they say nothing
}

// submittedJob is a job the workload submitted: its group and id.
type submittedJob struct{ group, id string }

// run reads with n clients until ctx ends, each one a job twice in a row
// every pause: the second read is asked after the first was answered, and
// may go to another coordinator, which must not answer from an older
// state.
func (r *readers) run(ctx context.Context, n int, pause time.Duration) {
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				if jobs := r.jobs(); len(jobs) > 0 {
					j := jobs[rand.IntN(len(jobs))] //nolint:gosec // G404: which job to read, not a secret
					r.read(ctx, c, j)
					r.read(ctx, c, j)
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	wg.Wait()
}

// read reads one job and records what it said.
func (r *readers) read(ctx context.Context, client int, j submittedJob) {
	readCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	call := time.Since(r.start)
	job, err := r.client.Get(readCtx, j.group, j.id)
	ret := time.Since(r.start)
	var o observation
	switch {
	case errors.Is(err, fairway.ErrNotFound):
		o.absent = true
	case err != nil:
		r.mu.Lock()
		r.failed++
		r.mu.Unlock()
		return
	default:
		o.state, o.attempt = job.State, job.Attempt
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: jobRead{id: j.id}, Call: int64(call), Output: o, Return: int64(ret)})
}

// check checks the reads recorded: the jobs whose reads are not
// linearizable (with one's reads, for diagnosis), and how many reads
// there were. givenBack is jobModel's.
func (r *readers) check(givenBack func(id string, attempt int) bool) (bad int, example string, reads int) {
	r.mu.Lock()
	ops := r.ops
	r.mu.Unlock()
	model := jobModel(givenBack)
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(model, part, 10*time.Second) == porcupine.Ok {
			continue
		}
		bad++
		if example == "" {
			example = describeReads(part)
		}
	}
	return bad, example, len(ops)
}

// describeReads lists a job's reads with their times.
func describeReads(ops []porcupine.Operation) string {
	s := ""
	for _, op := range ops {
		s += fmt.Sprintf(" [%s..%s] %s;", time.Duration(op.Call).Round(time.Millisecond), time.Duration(op.Return).Round(time.Millisecond),
			describeRead(op.Input, op.Output))
	}
	return s
}
