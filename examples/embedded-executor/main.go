// Command embedded-executor runs an executor inside its own process with a
// task of its own, submits a job of that task, waits for it to succeed,
// and exits 0.
//
// Start `fairway dev` first (it runs the NATS server and the coordinator):
//
//	go run ./cmd/fairway dev
//	go run ./examples/embedded-executor
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/nats-io/nats.go"
)

// greetArgs are the arguments of the task greet.
type greetArgs struct {
	Name string `json:"name"`
}

// greet is the task's code: it reads its arguments, logs to the job's log,
// reports progress and sets a result.
func greet(ctx context.Context, job *executor.Job) error {
	var args greetArgs
	if err := job.Bind(&args); err != nil {
		return fairway.Permanent(err) // bad arguments: retrying will not help
	}
	if args.Name == "" {
		return fairway.Permanent(fmt.Errorf("name is empty"))
	}
	job.Logger.Info("greeting", "name", args.Name) // stored as the job's log
	job.SetProgress(50)
	select {
	case <-ctx.Done(): // the job was cancelled, or the executor is stopping
		return ctx.Err()
	case <-time.After(10 * time.Millisecond): // the "work"
	}
	return job.SetResult(map[string]string{"greeting": "hello, " + args.Name})
}

func main() {
	natsURL := flag.String("nats-url", cmp.Or(os.Getenv("FAIRWAY_NATS_URL"), nats.DefaultURL), "NATS server URL (env FAIRWAY_NATS_URL)")
	group := flag.String("group", "examples", "the job's group (tenant)")
	name := flag.String("name", "world", "whom to greet")
	appID := flag.String("app-id", fmt.Sprintf("embedded-%d", os.Getpid()), "the executor's app-id, unique among running executors")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for the job")
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

	// The executor registers its tasks with the coordinators when it
	// starts; a submission of a task that no executor has registered is
	// refused, so start it before submitting.
	ex, err := executor.New(nc, executor.Config{
		AppID:    *appID,
		PoolSize: 2,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		log.Fatal(err)
	}
	ex.Handle("greet", greet)
	if err := ex.Start(ctx); err != nil {
		log.Fatal(err)
	}
	code := run(ctx, nc, *group, *name)
	// Stop taking jobs and let running ones finish, for up to 10 s; the
	// executor deregisters.
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelDrain()
	if err := ex.Shutdown(drainCtx); err != nil {
		log.Print(err)
	}
	os.Exit(code)
}

// run submits one greet job and waits for its final state.
func run(ctx context.Context, nc *nats.Conn, group, name string) int {
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		log.Print(err)
		return 1
	}
	final := make(chan events.Event, 1)
	since := time.Now().Add(-time.Second) // a little early: clocks of client and server may differ
	// SubmitWait goes through the request/reply API: it returns the stored
	// job, or the validation error (a *fairway.Error naming the field).
	args, _ := json.Marshal(greetArgs{Name: name})
	job, err := client.SubmitWait(ctx, fairway.Submission{Group: group, Task: "greet", Args: args})
	if err != nil {
		log.Print(err)
		return 1
	}
	fmt.Printf("submitted job %s (group %s, task greet)\n", job.ID, group)

	// Replay the group's events from just before the submission, so that
	// none of the job's is missed.
	sub, err := client.Subscribe(ctx, events.Filter{Group: group, Task: "greet", Since: since}, func(ev events.Event) {
		if ev.JobID == job.ID && ev.State.Final() {
			select {
			case final <- ev:
			default:
			}
		}
	})
	if err != nil {
		log.Print(err)
		return 1
	}
	defer sub.Stop()
	select {
	case ev := <-final:
		done, err := client.Get(ctx, group, job.ID)
		if err != nil {
			log.Print(err)
			return 1
		}
		fmt.Printf("result: %s\n", done.Result)
		fmt.Printf("final state: %s\n", ev.State)
		if ev.State != fairway.StateSuccess {
			fmt.Printf("error: %s\n", ev.Error)
			return 1
		}
		return 0
	case <-ctx.Done():
		log.Printf("job %s: no final state: %v", job.ID, ctx.Err())
		return 1
	}
}
