// Command goexecutor is the Go executor of the conformance suite
// (clients/conformance/README.md): package executor running the suite's
// conf-* tasks, with the flags and output every language's program shares.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/executor"
	"github.com/nats-io/nats.go"
)

func main() {
	natsURL := flag.String("nats-url", "", "the NATS server (required)")
	creds := flag.String("creds", "", "a .creds file to log in with")
	appID := flag.String("app-id", "", "the executor's app-id (required)")
	slots := flag.Int("slots", 4, "slots")
	only := flag.String("tasks", "", "register only these tasks, comma-separated (default: all)")
	flag.Parse()
	if *natsURL == "" || *appID == "" {
		fmt.Fprintln(os.Stderr, "goexecutor: --nats-url and --app-id are required")
		os.Exit(1)
	}
	os.Exit(run(*natsURL, *creds, *appID, *slots, *only))
}

func run(natsURL, creds, appID string, slots int, only string) int {
	opts := []nats.Option{nats.Name("fairway conformance goexecutor " + appID), nats.MaxReconnects(-1)}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goexecutor: connecting to %s: %v\n", natsURL, err)
		return 1
	}
	defer nc.Close()
	ex, err := executor.New(nc, executor.Config{
		AppID: appID, PoolSize: slots,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "goexecutor: %v\n", err)
		return 1
	}
	wanted := func(task string) bool { return only == "" || slices.Contains(strings.Split(only, ","), task) }
	for task, h := range handlers {
		if wanted(task) {
			var hopts []executor.HandleOption
			if task == "conf-one" {
				hopts = append(hopts, executor.MaxConcurrent(1))
			}
			ex.Handle(task, h, hopts...)
		}
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	startCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err = ex.Start(startCtx)
	cancel()
	if err != nil {
		if fe := fairway.AsError(err); fe != nil {
			fmt.Printf("conformance: refused: %s: %s\n", fe.Code, fe.Error())
			return 2
		}
		fmt.Fprintf(os.Stderr, "goexecutor: %v\n", err)
		return 1
	}
	fmt.Printf("conformance: registered %s %s\n", appID, ex.Instance())

	select {
	case <-signals:
	case <-ex.DrainRequested():
	}
	fmt.Println("conformance: stopping")
	// The first signal (or a drain): finish the running jobs; a second
	// signal cuts the wait short, the running jobs released.
	ctx, forced := context.WithCancel(context.Background())
	go func() {
		<-signals
		forced()
	}()
	if err := ex.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "goexecutor: shutdown: %v\n", err)
	}
	fmt.Println("conformance: stopped")
	return 0
}

// handlers are the suite's tasks (clients/conformance/README.md).
var handlers = map[string]executor.Handler{
	"conf-echo": func(ctx context.Context, job *executor.Job) error {
		job.Logger.Info(fmt.Sprintf("echo attempt %d", job.Attempt))
		job.SetProgress(50)
		job.SetProgress(100)
		return job.SetResult(job.Args)
	},
	"conf-sleep": sleep,
	"conf-one":   sleep,
	"conf-fail": func(ctx context.Context, job *executor.Job) error {
		var args struct {
			Message   string `json:"message"`
			Permanent bool   `json:"permanent"`
		}
		if err := job.Bind(&args); err != nil {
			return err
		}
		if args.Permanent {
			return fairway.Permanent(errors.New(args.Message))
		}
		return errors.New(args.Message)
	},
	"conf-snooze": func(ctx context.Context, job *executor.Job) error {
		var args struct {
			Seconds float64 `json:"seconds"`
		}
		if err := job.Bind(&args); err != nil {
			return err
		}
		return fairway.Snooze(time.Duration(args.Seconds * float64(time.Second)))
	},
	"conf-big": func(ctx context.Context, job *executor.Job) error {
		var args struct {
			Bytes int `json:"bytes"`
		}
		if err := job.Bind(&args); err != nil {
			return err
		}
		return job.SetResult(map[string]string{"data": strings.Repeat("x", args.Bytes)})
	},
	"conf-trace": func(ctx context.Context, job *executor.Job) error {
		return job.SetResult(map[string]string{"traceparent": job.TraceParent})
	},
}

func sleep(ctx context.Context, job *executor.Job) error {
	var args struct {
		MS int `json:"ms"`
	}
	if err := job.Bind(&args); err != nil {
		return err
	}
	select {
	case <-time.After(time.Duration(args.MS) * time.Millisecond):
		return job.SetResult(map[string]int{"slept": args.MS})
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
