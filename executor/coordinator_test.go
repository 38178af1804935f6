package executor_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 10 * time.Second

// coordinator stands in for Fairway's coordinators on a real NATS server:
// it answers register and dispatch requests with what the test chose, and
// reads the executor's reports from the RESULTS stream.
type coordinator struct {
	t        testing.TB
	nc       *nats.Conn // the coordinator's own connection
	subjects events.Subjects

	registers  chan events.RegisterRequest
	dispatches chan events.DispatchRequest
	stops      chan events.DispatchRequest // the dispatch requests that say the instance stops
	heartbeats chan events.Heartbeat
	reports    chan events.Report
	backlog    []events.Report // reports read but not asked for yet; test goroutine only

	mu          sync.Mutex
	registerErr *fairway.Error
	dispatchErr *fairway.Error // the answer to the next dispatch request, once
	dropNext    bool           // leave the next dispatch request unanswered
	queue       []fairway.Job
	handedOut   int
	violations  []string // dispatch requests that asked for more slots than free
	// finished, when set, returns how many handlers have returned; it lets
	// the coordinator check that a dispatch request never asks for more
	// slots than the executor can have free.
	finished func() int
	poolSize int
	// latency delays each dispatch reply that carries jobs, as a network
	// would: the round trip the executor measures is then at least this,
	// whatever the machine's load does to a job's run time.
	latency time.Duration
}

// bundle is what setup returns.
type bundle struct {
	coord  *coordinator
	execNC *nats.Conn // the executor's connection
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s, nc := natstest.Start(t)
	subjects := events.NewSubjects("")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, events.EnsureStreams(ctx, js, subjects, events.StreamOptions{}))

	c := &coordinator{
		t:          t,
		nc:         nc,
		subjects:   subjects,
		registers:  make(chan events.RegisterRequest, 16),
		dispatches: make(chan events.DispatchRequest, 1000),
		stops:      make(chan events.DispatchRequest, 16),
		heartbeats: make(chan events.Heartbeat, 1000),
		reports:    make(chan events.Report, 10000),
	}
	_, err = nc.Subscribe(subjects.ExecAll(events.ExecRegister), c.onRegister)
	require.NoError(t, err)
	_, err = nc.Subscribe(subjects.ExecAll(events.ExecDispatch), c.onDispatch)
	require.NoError(t, err)
	_, err = nc.Subscribe(subjects.ExecAll(events.ExecHeartbeat), func(msg *nats.Msg) {
		var hb events.Heartbeat
		if err := json.Unmarshal(msg.Data, &hb); err != nil {
			t.Errorf("undecodable heartbeat: %v", err)
			return
		}
		select {
		case c.heartbeats <- hb:
		default:
		}
	})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, subjects.ResultStream(), jetstream.ConsumerConfig{
		AckPolicy:     jetstream.AckExplicitPolicy,
		FilterSubject: subjects.ResultsAll(),
	})
	require.NoError(t, err)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		reports, err := events.DecodeReports(msg.Data())
		if err != nil {
			t.Errorf("undecodable report: %v", err)
		}
		_ = msg.Ack()
		for _, r := range reports {
			c.reports <- r
		}
	})
	require.NoError(t, err)
	t.Cleanup(cc.Stop)
	require.NoError(t, nc.Flush())

	execNC, err := natsserver.Connect(s, "executor")
	require.NoError(t, err)
	t.Cleanup(execNC.Close)
	return &bundle{coord: c, execNC: execNC}
}

func (c *coordinator) onRegister(msg *nats.Msg) {
	var req events.RegisterRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		c.t.Errorf("undecodable register request: %v", err)
		return
	}
	c.mu.Lock()
	reply := events.Reply{Error: c.registerErr}
	c.mu.Unlock()
	c.registers <- req
	c.respond(msg, reply)
}

func (c *coordinator) onDispatch(msg *nats.Msg) {
	var req events.DispatchRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		c.t.Errorf("undecodable dispatch request: %v", err)
		return
	}
	if req.Stopping {
		c.stops <- req
		c.respond(msg, events.DispatchReply{})
		return
	}
	c.mu.Lock()
	if c.dropNext {
		c.dropNext = false
		c.mu.Unlock()
		c.dispatches <- req
		return
	}
	if err := c.dispatchErr; err != nil {
		c.dispatchErr = nil
		c.mu.Unlock()
		c.dispatches <- req
		c.respond(msg, events.DispatchReply{Error: err})
		return
	}
	if req.Slots < 1 {
		c.violations = append(c.violations, "asked for no slots")
	}
	if c.finished != nil {
		// held >= handedOut - finished, so free <= pool - (handedOut - finished).
		if held := c.handedOut - c.finished(); req.Slots > c.poolSize-held {
			c.violations = append(c.violations, "asked for more slots than free")
		}
	}
	n := min(req.Slots, len(c.queue))
	jobs := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.handedOut += n
	latency := c.latency
	c.mu.Unlock()
	c.dispatches <- req
	if n > 0 && latency > 0 {
		time.Sleep(latency)
	}
	c.respond(msg, events.DispatchReply{Jobs: jobs})
}

func (c *coordinator) respond(msg *nats.Msg, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Errorf("encoding a reply: %v", err)
		return
	}
	if err := msg.Respond(data); err != nil {
		c.t.Errorf("replying: %v", err)
	}
}

// add queues jobs for the next dispatch requests.
func (c *coordinator) add(jobs ...fairway.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, jobs...)
}

// notify publishes a work notification.
func (c *coordinator) notify() {
	require.NoError(c.t, c.nc.Publish(c.subjects.NotifyWork(), nil))
	require.NoError(c.t, c.nc.Flush())
}

// cancel sends a cancel command to executor appID and waits for its reply.
func (c *coordinator) cancel(appID, group, jobID string, attempt int) events.Reply {
	data, err := json.Marshal(events.CancelCommand{Group: group, JobID: jobID, Attempt: attempt})
	require.NoError(c.t, err)
	msg, err := c.nc.Request(c.subjects.Cancel(appID), data, waitTimeout)
	require.NoError(c.t, err)
	var reply events.Reply
	require.NoError(c.t, json.Unmarshal(msg.Data, &reply))
	return reply
}

// nextDispatch waits for the next dispatch request.
func (c *coordinator) nextDispatch() events.DispatchRequest {
	c.t.Helper()
	select {
	case req := <-c.dispatches:
		return req
	case <-time.After(waitTimeout):
		c.t.Fatalf("no dispatch request within %s", waitTimeout)
		return events.DispatchRequest{}
	}
}

// reportsUntilDone collects the reports about jobID, in stream order,
// until its done report. Reports about other jobs are kept, in order, for
// later calls.
func (c *coordinator) reportsUntilDone(jobID string) []events.Report {
	c.t.Helper()
	var got []events.Report
	take := func(r events.Report) bool {
		got = append(got, r)
		return r.Type == events.ReportDone
	}
	kept := c.backlog[:0]
	done := false
	for _, r := range c.backlog {
		if !done && r.JobID == jobID {
			done = take(r)
			continue
		}
		kept = append(kept, r)
	}
	c.backlog = kept
	timeout := time.After(waitTimeout)
	for !done {
		select {
		case r := <-c.reports:
			if r.JobID != jobID {
				c.backlog = append(c.backlog, r)
				continue
			}
			done = take(r)
		case <-timeout:
			c.t.Fatalf("no done report for job %s within %s; got %+v", jobID, waitTimeout, got)
		}
	}
	return got
}

// report waits for jobID's first report of type typ, looking first at the
// reports kept by earlier calls. Reports about jobID that it reads from the
// stream before that one are dropped; those about other jobs are kept.
func (c *coordinator) report(jobID, typ string) events.Report {
	c.t.Helper()
	for i, r := range c.backlog {
		if r.JobID == jobID && r.Type == typ {
			c.backlog = append(c.backlog[:i:i], c.backlog[i+1:]...)
			return r
		}
	}
	timeout := time.After(waitTimeout)
	for {
		select {
		case r := <-c.reports:
			switch {
			case r.JobID != jobID:
				c.backlog = append(c.backlog, r)
			case r.Type == typ:
				return r
			}
		case <-timeout:
			c.t.Fatalf("no %s report for job %s within %s", typ, jobID, waitTimeout)
			return events.Report{}
		}
	}
}

// done waits for jobID's done report.
func (c *coordinator) done(jobID string) events.Report {
	c.t.Helper()
	reports := c.reportsUntilDone(jobID)
	return reports[len(reports)-1]
}

// newJob returns a job as a dispatch reply carries it.
func newJob(task string, args string) fairway.Job {
	return fairway.Job{
		ID:       fairway.NewID(),
		Task:     task,
		Group:    "acme",
		Args:     json.RawMessage(args),
		Priority: fairway.PriorityLow,
		State:    fairway.StateScheduled,
		Attempt:  1,
	}
}

// requireStarted checks that a job's start was reported, on its own (the
// first report) or folded into its done report, and returns the reports
// without the started one.
func requireStarted(t *testing.T, reports []events.Report) []events.Report {
	t.Helper()
	require.NotEmpty(t, reports)
	done := reports[len(reports)-1]
	require.Equal(t, events.ReportDone, done.Type)
	if reports[0].Type == events.ReportStarted {
		require.Nil(t, done.Started, "a start reported on its own is not in the done report")
		return reports[1:]
	}
	require.NotNil(t, done.Started, "the start is reported: on its own, or with the end")
	require.False(t, done.Started.After(done.Time), "started %s after its end %s", done.Started, done.Time)
	return reports
}

// types of the reports, in order.
func types(reports []events.Report) []string {
	out := make([]string, len(reports))
	for i, r := range reports {
		out[i] = r.Type
	}
	return out
}
