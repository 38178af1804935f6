package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Filter selects events; empty fields match everything.
type Filter struct {
	Group string
	Task  string
	State fairway.State
	// Since replays stored events from this time on; zero means only new
	// events. Use time.Unix(0, 0) to replay everything still stored.
	Since time.Time
}

// Subscription is a running event subscription.
type Subscription interface {
	// Stop ends the subscription; safe to call twice.
	Stop()
}

type subscription struct{ cc jetstream.ConsumeContext }

func (s subscription) Stop() { s.cc.Stop() }

// Subscribe calls handle for every event matching f, in stream order, until
// Stop, whether the coordinators publish events in batches (the default)
// or one per message. It uses an ordered (ephemeral) consumer: nothing to clean up, and
// it resumes by itself after a reconnect. An event that cannot be decoded
// is passed with only ID set and Error describing the problem.
func (c *Client) Subscribe(ctx context.Context, f Filter, handle func(Event)) (Subscription, error) {
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subjects.EventFilter(f.Group, f.Task, f.State)},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	}
	if !f.Since.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		since := f.Since
		cfg.OptStartTime = &since
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	cons, err := c.js.OrderedConsumer(ctx, c.subjects.EventStream(), cfg)
	if err != nil {
		return nil, fmt.Errorf("subscribing to events on stream %s: %w (is a coordinator running? it creates the stream)", c.subjects.EventStream(), err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		evs, err := DecodeEvents(msg.Data())
		if err != nil {
			handle(Event{ID: msg.Headers().Get(jetstream.MsgIDHeader), Error: fmt.Sprintf("undecodable event on %s: %v", msg.Subject(), err)})
			return
		}
		for _, ev := range evs {
			handle(ev)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("consuming events: %w", err)
	}
	return subscription{cc: cc}, nil
}

func checkFilter(f Filter) error {
	if f.Group != "" {
		if err := fairway.CheckName("group", f.Group); err != nil {
			return err
		}
	}
	if f.Task != "" {
		if err := fairway.CheckName("task", f.Task); err != nil {
			return err
		}
	}
	if f.State != "" && !f.State.Valid() && !f.State.EventOnly() {
		return fairway.Invalid("state", "unknown state %q", f.State)
	}
	return nil
}

// SubscribeProgress calls handle with the progress of running jobs of
// group and task ("": every one), as the coordinators publish it: at most
// once a second per job, on core NATS (<p>.progress.<group>.<task>), so
// only while subscribed; the job row keeps the latest value.
func (c *Client) SubscribeProgress(group, task string, handle func(fairway.Progress)) (Subscription, error) {
	if err := checkFilter(Filter{Group: group, Task: task}); err != nil {
		return nil, err
	}
	sub, err := c.nc.Subscribe(c.subjects.ProgressFilter(group, task), func(msg *nats.Msg) {
		var p fairway.Progress
		if json.Unmarshal(msg.Data, &p) == nil {
			handle(p)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to progress: %w", err)
	}
	return natsSubscription{sub}, nil
}

// natsSubscription is a core NATS subscription as a Subscription.
type natsSubscription struct{ sub *nats.Subscription }

func (s natsSubscription) Stop() { _ = s.sub.Unsubscribe() }

// JobEventsScanMax is how many stored events JobEvents reads at most.
const JobEventsScanMax = 20000

// JobEvents returns the stored events of one job, oldest first: it reads
// the events of the job's group and task from since (the job's submission
// time, say) until it has read every stored one, until (when not zero) has
// passed, or JobEventsScanMax have been read; the last case is reported by
// more. Events the stream has dropped by its limits are not returned.
// Meant for a job's timeline on a dashboard, not for following jobs:
// Subscribe does that.
func (c *Client) JobEvents(ctx context.Context, group, task, id string, since, until time.Time) (evs []Event, more bool, err error) {
	if err := checkFilter(Filter{Group: group, Task: task}); err != nil {
		return nil, false, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	start := since
	cons, err := c.js.OrderedConsumer(ctx, c.subjects.EventStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subjects.EventFilter(group, task, "")},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &start,
		// The server removes the consumer soon after the last read.
		InactiveThreshold: 5 * time.Second,
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading events on stream %s: %w", c.subjects.EventStream(), err)
	}
	for read := 0; read < JobEventsScanMax; {
		batch, err := cons.FetchNoWait(min(500, JobEventsScanMax-read))
		if err != nil {
			return nil, false, fmt.Errorf("reading events: %w", err)
		}
		got := 0
		pending := uint64(1)
		for msg := range batch.Messages() {
			got++
			read++
			meta, err := msg.Metadata()
			if err == nil {
				pending = meta.NumPending
				if !until.IsZero() && meta.Timestamp.After(until) {
					return evs, false, nil
				}
			}
			batch, err := DecodeEvents(msg.Data())
			if err != nil {
				continue
			}
			for _, ev := range batch {
				if ev.JobID == id {
					evs = append(evs, ev)
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, false, fmt.Errorf("reading events: %w", err)
		}
		if got == 0 || pending == 0 {
			return evs, false, nil
		}
	}
	return evs, true, nil
}
