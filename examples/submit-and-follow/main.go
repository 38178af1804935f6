// Command submit-and-follow submits a job with the Go client and prints the
// job's events until it reaches a final state.
//
// Start `fairway dev` first; its executor runs the demo task echo:
//
//	go run ./cmd/fairway dev
//	go run ./examples/submit-and-follow
//
// It exits 0 when the job succeeded and 1 otherwise.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

func main() {
	natsURL := flag.String("nats-url", cmp.Or(os.Getenv("FAIRWAY_NATS_URL"), nats.DefaultURL), "NATS server URL (env FAIRWAY_NATS_URL)")
	group := flag.String("group", "examples", "the job's group (tenant)")
	task := flag.String("task", "echo", "the task to run (fairway dev's executor runs echo, sleep, fail, panic, snooze)")
	args := flag.String("args", `{"hello":"world"}`, "the job's arguments, a JSON object")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for the final state")
	flag.Parse()
	log.SetFlags(0)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	nc, err := nats.Connect(*natsURL)
	if err != nil {
		log.Fatalf("connecting to %q: %v", *natsURL, err) //nolint:gosec // G706: %q quotes the flag: no line break reaches the log
	}
	defer nc.Close()
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}

	// Give the job its id here, so that the events can be matched to it
	// before the submission returns (and a retried publish stays one job).
	sub := fairway.Submission{Group: *group, Task: *task, Args: json.RawMessage(*args)}
	sub.ID = fmt.Sprintf("follow-%d", time.Now().UnixNano())

	// Subscribe before submitting: a subscription without Since sees only
	// the events published after it starts.
	final := make(chan events.Event, 1)
	subscription, err := client.Subscribe(ctx, events.Filter{Group: *group, Task: *task}, func(ev events.Event) {
		if ev.JobID != sub.ID {
			return
		}
		from := cmp.Or(string(ev.PreviousState), "submitted")
		fmt.Printf("event: %s -> %s (attempt %d)\n", from, ev.State, ev.Attempt)
		if ev.State.Final() || ev.State == fairway.StateRejected {
			select {
			case final <- ev:
			default:
			}
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer subscription.Stop()

	// Submit publishes to the submit stream and returns once JetStream has
	// stored the submission; validation errors arrive as a rejected event.
	id, err := client.Submit(ctx, sub)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("submitted job %s (group %s, task %s)\n", id, *group, *task)

	select {
	case ev := <-final:
		job, err := client.Get(ctx, *group, id)
		if err == nil && len(job.Result) > 0 {
			fmt.Printf("result: %s\n", job.Result)
		}
		fmt.Printf("final state: %s\n", ev.State)
		if ev.State != fairway.StateSuccess {
			if ev.Error != "" {
				fmt.Printf("error: %s\n", ev.Error)
			}
			os.Exit(1)
		}
	case <-ctx.Done():
		log.Fatalf("job %q: no final state: %v", id, ctx.Err()) //nolint:gosec // G706: %q quotes the id
	}
}
