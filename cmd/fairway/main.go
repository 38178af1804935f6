// Command fairway runs Fairway: the development cluster, coordinators,
// executors, and the client commands that submit and follow jobs.
package main

import (
	"context"
	"os"

	"github.com/fairwayhq/fairway/internal/cli"
)

func main() {
	ctx, force, stop := cli.NotifyShutdown(context.Background(), os.Stderr, os.Exit)
	code := cli.Main(ctx, force, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
