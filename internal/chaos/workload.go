package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// kind is the sort of job and the final state it must reach.
type kind struct {
	task  string
	args  string
	final fairway.State
}

// mix is the workload: mostly quick jobs, some slow ones, some that fail
// once and then succeed, some that fail for good. Index i of a job picks
// mix[i%len(mix)].
var mix = []kind{
	{"echo", `{}`, fairway.StateSuccess},
	{"sleep", `{"seconds":0.3}`, fairway.StateSuccess},
	{"echo", `{}`, fairway.StateSuccess},
	{"fail", `{"times":1}`, fairway.StateSuccess},
	{"echo", `{}`, fairway.StateSuccess},
	{"sleep", `{"seconds":1.5}`, fairway.StateSuccess},
	{"echo", `{}`, fairway.StateSuccess},
	{"echo", `{}`, fairway.StateSuccess},
	{"fail", `{"permanent":true}`, fairway.StateFailed},
	{"echo", `{}`, fairway.StateSuccess},
}

// Workload submits jobs at a steady rate over several groups, retrying a
// batch until JetStream acknowledges it (through NATS outages). Only
// acknowledged jobs count as submitted.
type Workload struct {
	client *events.Client
	nc     *nats.Conn

	mu    sync.Mutex
	acked map[string]kind
	// watched are every fifth job acknowledged, in order: the readers
	// read the newest of them (readers, linearize.go).
	watched  []submittedJob
	attempts int // publishes that failed and were retried
	lastErr  error
}

func newWorkload(natsURL string) (*Workload, *nats.Conn, error) {
	nc, err := nats.Connect(natsURL, nats.Name("chaos-workload"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return &Workload{client: client, nc: nc, acked: map[string]kind{}}, nc, nil
}

// run submits n jobs spread evenly over d, in batches every 50 ms.
func (w *Workload) run(ctx context.Context, n int, d time.Duration) error {
	const tick = 50 * time.Millisecond
	ticks := max(int(d/tick), 1)
	perTick := (n + ticks - 1) / ticks
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for i := 0; i < n; i += perTick {
		batch := make([]fairway.Submission, 0, perTick)
		kinds := make([]kind, 0, perTick)
		for j := i; j < min(i+perTick, n); j++ {
			k := mix[j%len(mix)]
			batch = append(batch, fairway.Submission{ID: fairway.NewID(), Task: k.task, Group: fmt.Sprintf("tenant-%d", j%7), Args: json.RawMessage(k.args)})
			kinds = append(kinds, k)
		}
		if err := w.submit(ctx, batch, kinds); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
	return nil
}

func (w *Workload) submit(ctx context.Context, batch []fairway.Submission, kinds []kind) error {
	for {
		// Each attempt has its own timeout: acks that never come (a server
		// whose JetStream is not back yet) must not hold the whole run.
		attemptCtx, cancel := context.WithTimeout(ctx, submitAttemptTimeout)
		_, err := w.client.SubmitMany(attemptCtx, batch)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("submitting: %w (last error: %v)", ctx.Err(), err)
		}
		w.mu.Lock()
		w.attempts++
		w.lastErr = err
		w.mu.Unlock()
		// Try another server of the cluster: this one may be up with its
		// JetStream still out of the cluster.
		_ = w.nc.ForceReconnect()
		// The same ids again: JetStream and the store de-duplicate them.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range batch {
		w.acked[s.ID] = kinds[i]
		if len(w.acked)%5 == 0 {
			w.watched = append(w.watched, submittedJob{group: s.Group, id: s.ID})
		}
	}
	return nil
}

// inFlight returns the newest watched jobs: most are in flight while the
// workload submits, so that each is read several times along its life.
func (w *Workload) inFlight() []submittedJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watched[max(len(w.watched)-20, 0):]
}

// submitAttemptTimeout bounds one attempt to publish a batch.
const submitAttemptTimeout = 10 * time.Second

// submitted returns the acknowledged jobs.
func (w *Workload) submitted() map[string]kind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]kind, len(w.acked))
	for id, k := range w.acked {
		out[id] = k
	}
	return out
}
