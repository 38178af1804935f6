package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// These examples need a running Fairway (`fairway dev`): the tests compile
// them but do not run them. examples/ holds whole programs that the tests
// do run.

// connect opens a client on fairway dev's NATS server.
func connect() (*events.Client, *nats.Conn) {
	nc, err := nats.Connect(nats.DefaultURL) // nats://127.0.0.1:4222, where fairway dev listens
	if err != nil {
		log.Fatal(err)
	}
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	return client, nc
}

// Submit publishes to the submit stream and returns once JetStream has
// stored the submission. A job id of your own makes a publish sent again
// the same job.
func ExampleClient_Submit() {
	client, nc := connect()
	defer nc.Close()
	ctx := context.Background()

	id, err := client.Submit(ctx, fairway.Submission{
		ID:       "invoice-2026-0042", // optional: idempotent within the group
		Group:    "acme",
		Task:     "echo",
		Args:     json.RawMessage(`{"invoice":42}`),
		Priority: fairway.PriorityHigh,
	})
	if err != nil {
		log.Fatal(err) // JetStream did not store it: submit again
	}
	fmt.Println("stored", id)
}

// SubmitMany publishes many jobs with one wait for JetStream; the ids come
// back in order.
func ExampleClient_SubmitMany() {
	client, nc := connect()
	defer nc.Close()

	subs := make([]fairway.Submission, 100)
	for i := range subs {
		subs[i] = fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	ids, err := client.SubmitMany(context.Background(), subs)
	if err != nil {
		log.Fatal(err) // some may be stored: submitting the same ids again is safe
	}
	fmt.Println(len(ids), "jobs stored")
}

// Wait, right after Submit, returns the job once it ended: its result,
// or its error; many jobs at once with WaitMany.
func ExampleClient_Wait() {
	client, nc := connect()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	id, err := client.Submit(ctx, fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(`{"invoice":42}`)})
	if err != nil {
		log.Fatal(err)
	}
	job, err := client.Wait(ctx, "acme", id)
	switch {
	case err != nil:
		log.Fatal(err) // rejected (a *fairway.Error naming the field), or ctx ended first
	case job.State == fairway.StateSuccess:
		fmt.Println("result", string(job.Result))
	default:
		fmt.Println(job.State, job.Error) // failed or cancelled
	}
}

// SubmitWait goes through the request/reply API: the job is in PostgreSQL
// when it returns, and a refusal says why at once.
func ExampleClient_SubmitWait() {
	client, nc := connect()
	defer nc.Close()

	job, err := client.SubmitWait(context.Background(), fairway.Submission{
		Group: "acme", Task: "echo", Tracker: "mailbox-7", // one non-final job per tracker
	})
	switch {
	case errors.Is(err, fairway.ErrDuplicate):
		fmt.Println("already queued:", fairway.AsError(err).JobID)
	case errors.Is(err, fairway.ErrInvalid):
		fmt.Println("invalid field:", fairway.AsError(err).Field)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(job.ID, job.State)
	}
}

// Subscribe follows events as they are published; Since replays the stored
// ones first. Delivery is at least once: drop duplicates by ID.
func ExampleClient_Subscribe() {
	client, nc := connect()
	defer nc.Close()

	seen := map[string]bool{}
	sub, err := client.Subscribe(context.Background(), events.Filter{
		Group: "acme",
		State: fairway.StateFailed,
		Since: time.Now().Add(-time.Hour),
	}, func(ev events.Event) {
		if seen[ev.ID] {
			return
		}
		seen[ev.ID] = true
		fmt.Printf("%s %s failed: %s\n", ev.Task, ev.JobID, ev.Error)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Stop()
	time.Sleep(10 * time.Second) // a program would run until it is told to stop
}

// Get, Logs and Cancel name the job by its group and id.
func ExampleClient_Get() {
	client, nc := connect()
	defer nc.Close()
	ctx := context.Background()

	job, err := client.Get(ctx, "acme", "invoice-2026-0042")
	if errors.Is(err, fairway.ErrNotFound) {
		fmt.Println("no such job")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, job.Progress)
	lines, err := client.Logs(ctx, "acme", job.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range lines {
		fmt.Println(l.Time.Format(time.RFC3339), l.Level, l.Message)
	}
	if !job.State.Final() {
		if _, err := client.Cancel(ctx, "acme", job.ID); err != nil {
			log.Fatal(err)
		}
	}
}

// List pages through jobs, newest first; with a Group it asks that
// tenant's API, without one the operator API.
func ExampleClient_List() {
	client, nc := connect()
	defer nc.Close()

	jobs, err := client.List(context.Background(), events.ListRequest{Group: "acme", State: fairway.StateStuck, Limit: 500})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println(j.ID, j.Task, j.Attempt, j.Error)
	}
}

// A periodic task submits a job each time its calendar event comes round
// (operator API).
func ExampleClient_SavePeriodic() {
	client, nc := connect()
	defer nc.Close()

	p, err := client.SavePeriodic(context.Background(), fairway.PeriodicTask{
		ID:      "poll-mail",
		Enabled: true,
		Task:    "echo",
		Group:   "acme",
		Timer:   "*-*-* *:0/15", // every quarter hour
		Args:    json.RawMessage(`{"mailbox":"inbox"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next run", p.NextRun)
}
