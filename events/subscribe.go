package events

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
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
// Stop. It uses an ordered (ephemeral) consumer: nothing to clean up, and
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
		var ev Event
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			ev = Event{ID: msg.Headers().Get(jetstream.MsgIDHeader), Error: fmt.Sprintf("undecodable event on %s: %v", msg.Subject(), err)}
		}
		handle(ev)
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
