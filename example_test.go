package fairway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/nats-io/nats.go"
)

// Example runs an executor with a task of its own, submits a job to it
// through a running Fairway (`fairway dev`), and follows the job's events
// to its end. The executor starts first: a job of a task that no executor
// has registered is refused.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	nc, err := nats.Connect("nats://127.0.0.1:4222") // with tenants: nats.UserCredentials("tenant-acme.creds")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	// Run tasks.
	ex, err := executor.New(nc, executor.Config{AppID: "worker-1", PoolSize: 8})
	if err != nil {
		log.Fatal(err)
	}
	ex.Handle("resize", func(ctx context.Context, job *executor.Job) error {
		var args struct{ W int }
		if err := job.Bind(&args); err != nil {
			return fairway.Permanent(err) // no retry
		}
		job.Logger.Info("resizing", "width", args.W) // stored as the job's log
		job.SetProgress(50)
		return job.SetResult(map[string]int{"w": args.W})
	})
	if err := ex.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		// Stop taking jobs; let the running ones finish for up to 30 s.
		drainCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ex.Shutdown(drainCtx); err != nil {
			log.Print(err)
		}
	}()

	// Submit, with validation errors at once (SubmitWait), and wait for
	// the job to end (Wait: its result, or its error).
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	job, err := client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "resize", Args: json.RawMessage(`{"w":100}`)})
	if err != nil {
		log.Fatal(err) // a *fairway.Error names the field at fault
	}
	job, err = client.Wait(ctx, "acme", job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", job.ID, job.State, string(job.Result))
}
