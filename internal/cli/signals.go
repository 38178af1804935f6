package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// exitSignal is the exit code of a process ended by a third signal.
const exitSignal = 130

// NotifyShutdown turns SIGINT and SIGTERM into the stages of a shutdown,
// as Sidekiq does:
//
//   - the first cancels ctx: commands stop taking work, and an executor lets
//     its running jobs finish (at most executor.drain-timeout);
//   - the second closes force: an executor cancels its running jobs, which
//     return to waiting without counting as a failed attempt;
//   - the third writes a line to stderr and calls exit(130): jobs still
//     running end as lost (a failed attempt) once their lease runs out, or
//     at once when the executor restarts.
//
// stop stops listening for the signals; call it once the command returned.
func NotifyShutdown(parent context.Context, stderr io.Writer, exit func(code int)) (ctx context.Context, force <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, force, stopRelay := relaySignals(parent, sigs, stderr, exit)
	return ctx, force, func() {
		signal.Stop(sigs)
		stopRelay()
	}
}

// relaySignals is NotifyShutdown reading its signals from sigs.
func relaySignals(parent context.Context, sigs <-chan os.Signal, stderr io.Writer, exit func(int)) (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	force := make(chan struct{})
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			var sig os.Signal
			select {
			case <-quit:
				return
			case sig = <-sigs:
			}
			switch n {
			case 1:
				cancel(fmt.Errorf("%v: stopping", sig))
			case 2:
				close(force)
			default:
				fmt.Fprintf(stderr, "fairway: third signal (%v): exiting at once; running jobs are lost, and retried once their lease runs out\n", sig)
				exit(exitSignal)
				return
			}
		}
	}()
	var once sync.Once
	return ctx, force, func() {
		once.Do(func() {
			close(quit)
			<-done
			cancel(nil)
		})
	}
}
