package executor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/executor"
	"github.com/nats-io/nats.go"
)

// These examples need a running Fairway (`fairway dev`): the tests compile
// them but do not run them. examples/embedded-executor is a whole program
// that the tests run.

// An executor runs the tasks it was given handlers for, up to PoolSize jobs
// at once, until it is shut down. Start registers its tasks with the
// coordinators: start it before submitting jobs of a new task.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect(nats.DefaultURL) // with accounts: nats.UserCredentials("worker-1.creds")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	ex, err := executor.New(nc, executor.Config{
		AppID:    "worker-1", // unique among running executors
		PoolSize: 8,
		Logger:   slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	ex.Handle("thumbnail", func(ctx context.Context, job *executor.Job) error {
		return nil // see ExampleExecutor_Handle
	})
	if err := ex.Start(ctx); err != nil {
		log.Fatal(err) // e.g. another live executor holds the app-id
	}
	<-ctx.Done() // Ctrl-C or SIGTERM

	// Stop taking jobs, and give the running ones 30 s to finish; those
	// still running then go back to waiting, without a failed attempt.
	drainCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ex.Shutdown(drainCtx); err != nil {
		log.Print(err)
	}
}

// A handler decodes its args, logs to the job's log, reports progress and
// sets a result. An error fails the attempt (retried after a delay while
// retries remain); fairway.Permanent fails the job at once. Its context
// ends when the job is cancelled or the executor stops waiting for it.
func ExampleExecutor_Handle() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	ex, err := executor.New(nc, executor.Config{AppID: "worker-2"})
	if err != nil {
		log.Fatal(err)
	}

	ex.Handle("export", func(ctx context.Context, job *executor.Job) error {
		var args struct {
			Table string `json:"table"`
			Rows  int    `json:"rows"`
		}
		if err := job.Bind(&args); err != nil {
			return fairway.Permanent(err) // bad args: no retry
		}
		if args.Table == "" {
			return fairway.Permanent(errors.New("args.table is required"))
		}
		for done := 0; done < args.Rows; done += 1000 {
			select {
			case <-ctx.Done():
				return ctx.Err() // cancelled, or the executor is stopping
			default:
			}
			// … export rows done to done+1000; an error here is retried …
			job.SetProgress(done * 100 / args.Rows)
		}
		job.Logger.Info("exported", "table", args.Table, "rows", args.Rows) // stored with the job
		return job.SetResult(map[string]any{"table": args.Table, "rows": args.Rows})
	})

	if err := ex.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ex.Shutdown(ctx); err != nil {
			log.Print(err)
		}
	}()
	fmt.Println("running", ex.Running(), "jobs")
}

// Middleware wraps every handler: here each attempt is timed and a job's
// tenant is put in the context the handler sees. The first middleware
// added is the outermost.
func ExampleExecutor_Use() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	ex, err := executor.New(nc, executor.Config{AppID: "worker-1",
		// Attempts of "report" that run longer than 10 minutes fail with
		// a timeout (a job's own "timeout" wins).
		Timeouts: map[string]time.Duration{"report": 10 * time.Minute}})
	if err != nil {
		log.Fatal(err)
	}
	type tenantKey struct{}
	ex.Use(
		func(next executor.Handler) executor.Handler {
			return func(ctx context.Context, job *executor.Job) error {
				start := time.Now()
				err := next(ctx, job)
				job.Logger.Info("attempt ends", "duration", time.Since(start), "failed", err != nil)
				return err
			}
		},
		func(next executor.Handler) executor.Handler {
			return func(ctx context.Context, job *executor.Job) error {
				return next(context.WithValue(ctx, tenantKey{}, job.Group), job)
			}
		},
	)
	ex.Handle("report", func(ctx context.Context, job *executor.Job) error {
		fmt.Println("report for", ctx.Value(tenantKey{}))
		return nil
	})
	if err := ex.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	defer ex.Stop()
}
