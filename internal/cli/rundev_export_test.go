package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/stretchr/testify/require"
)

// RunningDev is a `fairway dev` that a test runs in its own process.
type RunningDev struct {
	Stderr  *devtest.Output
	done    chan int
	cancel  context.CancelFunc
	force   chan struct{}
	signals int
}

// StartDev runs `fairway dev` with args and returns once its stderr shows
// ready; it fails the test if dev exits or is not ready within a minute.
// Dev is stopped when the test ends, if the test did not stop it.
func StartDev(t *testing.T, ready string, args ...string) *RunningDev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := &RunningDev{Stderr: &devtest.Output{}, done: make(chan int, 1), cancel: cancel, force: make(chan struct{})}
	go func() { d.done <- Main(ctx, d.force, append([]string{"dev"}, args...), &bytes.Buffer{}, d.Stderr) }()
	select {
	case <-d.Stderr.Seen(ready):
	case code := <-d.done:
		t.Fatalf("fairway dev exited with %d:\n%s", code, d.Stderr)
	case <-time.After(time.Minute):
		t.Fatalf("fairway dev did not start within a minute:\n%s", d.Stderr)
	}
	return d
}

// Stop stops dev as Ctrl-C does and requires it to exit 0.
func (d *RunningDev) Stop(t *testing.T) {
	t.Helper()
	d.cancel()
	d.Exited(t, "a stop")
}

// Signal does what a SIGINT or SIGTERM does to dev (see NotifyShutdown):
// the first asks it to stop, the second to cancel its running jobs. Not
// safe for concurrent use.
func (d *RunningDev) Signal() {
	d.signals++
	switch d.signals {
	case 1:
		d.cancel()
	case 2:
		close(d.force)
	}
}

// Code returns dev's exit code, failing the test if it does not exit
// within a minute.
func (d *RunningDev) Code(t *testing.T) int {
	t.Helper()
	select {
	case code := <-d.done:
		return code
	case <-time.After(time.Minute):
		t.Fatalf("fairway dev did not exit within a minute:\n%s", d.Stderr)
		return 0
	}
}

// Exited requires dev to exit 0 within a minute of what (already asked
// for, say by its shutdown endpoint).
func (d *RunningDev) Exited(t *testing.T, what string) {
	t.Helper()
	select {
	case code := <-d.done:
		require.Equal(t, 0, code, d.Stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("fairway dev did not stop after %s", what)
	}
}
