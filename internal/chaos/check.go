package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Result is the accounting of one scenario.
type Result struct {
	Scenario  string
	Submitted int // acknowledged by JetStream
	Final     int // reached a final state in PostgreSQL
	Lost      int // acknowledged but not final (or not stored at all)
	// Concurrent counts jobs that two runs executed at the same time, from
	// the executors' own logs.
	Concurrent int
	// NotOneFinal counts jobs with more than one final state among their
	// events, or events that disagree with PostgreSQL.
	NotOneFinal int
	// WithoutEvent counts committed changes with no event: a final state,
	// or a claim (attempt), that PostgreSQL holds and the event stream
	// does not, plus outbox rows never published.
	WithoutEvent int
	// Unexpected counts jobs whose final state is not the one their task
	// should reach (a lost attempt can use up a job's retries).
	Unexpected int
	// Reruns counts runs beyond the first of the jobs that did not fail on
	// purpose: the price of at-least-once after faults.
	Reruns int
	// Recovery is the longest time from a fault until every job that was
	// in flight (scheduled or running) at the fault reached a final state.
	Recovery time.Duration
	Faults   int
	Duration time.Duration
	// Slowest is the longest time from a job's first event to its final
	// one, and SlowestJob that job's events.
	Slowest    time.Duration
	SlowestJob string
	// RerunJobs and LostJobs show the events of a few rerun and lost
	// jobs, for diagnosis.
	RerunJobs, LostJobs []string
	// Reads counts the API's reads of jobs in flight during the run
	// (linearize.go), and NotLinearizable the jobs whose reads no order
	// that agrees with real time explains (a read older than one answered
	// before it was asked), NotLinearizableJob one's reads.
	Reads              int
	NotLinearizable    int
	NotLinearizableJob string
	// Releases counts the jobs put back to run again, by the reason their
	// stuck event gives ("executor lost: it restarted", "executor lost:
	// its lease expired without a heartbeat", a task's error, ...).
	Releases map[string]int
}

func (r Result) String() string {
	return fmt.Sprintf("%-22s submitted=%-6d final=%-6d lost=%d concurrent=%d not_one_final=%d without_event=%d unexpected=%d reruns=%d reads=%d not_linearizable=%d faults=%d recovery=%s slowest=%s took=%s",
		r.Scenario, r.Submitted, r.Final, r.Lost, r.Concurrent, r.NotOneFinal, r.WithoutEvent, r.Unexpected, r.Reruns, r.Reads, r.NotLinearizable, r.Faults,
		r.Recovery.Round(10*time.Millisecond), r.Slowest.Round(10*time.Millisecond), r.Duration.Round(100*time.Millisecond))
}

// OK says whether the guarantees held.
func (r Result) OK() bool {
	return r.Lost == 0 && r.Concurrent == 0 && r.NotOneFinal == 0 && r.WithoutEvent == 0 && r.NotLinearizable == 0
}

// waitFinal waits until every job of ids is in a final state in
// PostgreSQL, or until ctx ends. It polls: PostgreSQL is the ground truth
// and no single event says "all done" across outages.
func waitFinal(ctx context.Context, db databases, ids []string) error {
	for {
		n, err := db.countFinal(ctx, ids)
		if err == nil && n == len(ids) {
			if outbox, err := db.outboxLen(ctx); err == nil && outbox == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil // the accounting reports what is missing
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readEvents reads the whole event stream.
func readEvents(ctx context.Context, natsURL string) ([]events.Event, error) {
	// Right after a fault the server the connection lands on may not serve
	// JetStream yet ("no responders"): try again, on a new connection (to a
	// server picked at random), until ctx ends.
	for {
		evs, err := readEventsOnce(ctx, natsURL)
		if err == nil || ctx.Err() != nil {
			return evs, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (context: %v)", err, ctx.Err())
		case <-time.After(500 * time.Millisecond): // nothing to await: JetStream says nothing when it is back
		}
	}
}

func readEventsOnce(ctx context.Context, natsURL string) ([]events.Event, error) {
	nc, err := nats.Connect(natsURL, nats.Name("chaos-check"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, events.NewSubjects("").EventStream())
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, err
	}
	var out []events.Event
	for seq := uint64(0); seq < last; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			seq = meta.Sequence.Stream
			evs, err := events.DecodeEvents(msg.Data())
			if err != nil {
				return nil, fmt.Errorf("event message %d: %w", seq, err)
			}
			out = append(out, evs...)
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("event stream: read %d of %d", seq, last)
		}
	}
	return out, nil
}

// jobRow is what the accounting reads of a job in PostgreSQL.
type jobRow struct {
	state   fairway.State
	attempt int
	retries int
}

func readJobs(ctx context.Context, dbs databases) (map[string]jobRow, int, error) {
	jobs := map[string]jobRow{}
	for _, db := range dbs { // a job lives in its partition's database only
		all, err := db.AllJobAttempts(ctx)
		if err != nil {
			return nil, 0, err
		}
		for _, j := range all {
			jobs[j.ID] = jobRow{state: j.State, attempt: j.Attempt, retries: j.Retries}
		}
	}
	outbox, err := dbs.outboxLen(ctx)
	return jobs, outbox, err
}

// databases are the cluster's database and those of its other
// partitions (Cluster.DBs): the accounting adds up what each holds.
type databases []*store.Store

// countFinal counts the jobs of ids in a final state, in every database.
func (dbs databases) countFinal(ctx context.Context, ids []string) (int, error) {
	total := 0
	for _, db := range dbs {
		n, err := db.CountFinal(ctx, ids)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// outboxLen counts the events written and not yet published, in every
// database.
func (dbs databases) outboxLen(ctx context.Context) (int, error) {
	total := 0
	for _, db := range dbs {
		n, err := db.OutboxLen(ctx)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Close closes every database.
func (dbs databases) Close() {
	for _, db := range dbs {
		db.Close()
	}
}

// account checks the guarantees for the submitted jobs.
func account(r *Result, submitted map[string]kind, jobs map[string]jobRow, outbox int, evs []events.Event, trace *Trace, faults []time.Time) {
	r.Submitted = len(submitted)
	byJob := map[string][]events.Event{}
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.ID] { // at-least-once: a duplicate delivery of one event
			continue
		}
		seen[ev.ID] = true
		byJob[ev.JobID] = append(byJob[ev.JobID], ev)
	}
	r.WithoutEvent = outbox
	_, runs := trace.overlapping(time.Now())
	concurrent, _ := trace.overlapping(time.Now())
	r.Concurrent = len(concurrent)
	for id, k := range submitted {
		row, ok := jobs[id]
		if !ok || !row.state.Final() {
			r.Lost++
			if len(r.LostJobs) < 3 {
				r.LostJobs = append(r.LostJobs, fmt.Sprintf("%s (%s, stored %v, state %q): %s", id, k.task, ok, row.state, history(byJob[id])))
			}
			continue
		}
		r.Final++
		if row.state != k.final {
			r.Unexpected++
		}
		if k.task != "fail" && runs[id] > 1 {
			r.Reruns += runs[id] - 1
			if len(r.RerunJobs) < 3 {
				r.RerunJobs = append(r.RerunJobs, id+":"+history(byJob[id]))
			}
		}
		var finals []fairway.State
		claimed := map[int]bool{}
		for _, ev := range byJob[id] {
			if ev.State.Final() {
				finals = append(finals, ev.State)
			}
			if ev.State == fairway.StateStuck {
				if r.Releases == nil {
					r.Releases = map[string]int{}
				}
				r.Releases[ev.Error]++
			}
			if ev.State == fairway.StateScheduled {
				claimed[ev.Attempt] = true
			}
		}
		if evs := byJob[id]; len(evs) > 1 {
			slices.SortFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
			if d := evs[len(evs)-1].Time.Sub(evs[0].Time); d > r.Slowest {
				r.Slowest = d
				r.SlowestJob = id + ":" + history(evs)
			}
		}
		switch {
		case len(finals) == 0:
			r.WithoutEvent++
		case len(finals) > 1 || finals[0] != row.state:
			r.NotOneFinal++
		}
		if missing := row.attempt - len(claimed); missing > 0 {
			r.WithoutEvent += missing
		}
	}
	r.Faults = len(faults)
	for _, f := range faults {
		if d := recovery(byJob, submitted, f); d > r.Recovery {
			r.Recovery = d
		}
	}
}

// history renders a job's events (sorted by time) with times relative to
// the first.
func history(evs []events.Event) string {
	slices.SortFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, " %s@+%s/%s", ev.State, ev.Time.Sub(evs[0].Time).Round(time.Millisecond), ev.Executor)
		if ev.Error != "" {
			fmt.Fprintf(&b, "(%s)", ev.Error)
		}
	}
	return b.String()
}

// recovery is the time from fault until the last of the jobs in flight at
// the fault (last event before it: scheduled or running) reached a final
// state.
func recovery(byJob map[string][]events.Event, submitted map[string]kind, fault time.Time) time.Duration {
	var worst time.Duration
	for id := range submitted {
		evs := byJob[id]
		slices.SortFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
		var before *events.Event
		for i := range evs {
			if evs[i].Time.After(fault) {
				break
			}
			before = &evs[i]
		}
		if before == nil || (before.State != fairway.StateScheduled && before.State != fairway.StateRunning) {
			continue
		}
		for _, ev := range evs {
			if ev.State.Final() && ev.Time.After(fault) {
				worst = max(worst, ev.Time.Sub(fault))
				break
			}
		}
	}
	return worst
}

// Table renders results as a Markdown table.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | submitted | final | lost | concurrent | not one final | without event | unexpected | reruns | reads | not linearizable | faults | recovery |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.Scenario, r.Submitted, r.Final, r.Lost, r.Concurrent,
			r.NotOneFinal, r.WithoutEvent, r.Unexpected, r.Reruns, r.Reads, r.NotLinearizable, r.Faults, r.Recovery.Round(10*time.Millisecond))
	}
	return b.String()
}
