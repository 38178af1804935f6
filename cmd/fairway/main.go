// Command fairway runs Fairway: the development cluster, coordinators,
// executors, and the client commands that submit and follow jobs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fairwayhq/fairway/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
