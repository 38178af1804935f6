package cli

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestShutdownSignalStages feeds signals to the relay: the first cancels
// the context, the second closes force, the third exits with 130.
func TestShutdownSignalStages(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal)
	exited := make(chan int, 1)
	var stderr bytes.Buffer
	ctx, force, stop := relaySignals(context.Background(), sigs, &stderr, func(code int) { exited <- code })
	defer stop()

	send := func(sig os.Signal) {
		t.Helper()
		select {
		case sigs <- sig:
		case <-time.After(5 * time.Second):
			t.Fatalf("the relay did not take %v", sig)
		}
	}
	require.NoError(t, ctx.Err(), "no signal yet")

	send(os.Interrupt)
	<-ctx.Done()
	require.ErrorContains(t, context.Cause(ctx), "interrupt: stopping")
	select {
	case <-force:
		t.Fatal("the first signal forced the shutdown")
	default:
	}

	send(syscall.SIGTERM)
	select {
	case <-force:
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not force the shutdown")
	}
	require.Empty(t, exited)

	send(syscall.SIGTERM)
	select {
	case code := <-exited:
		require.Equal(t, 130, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the third signal did not exit")
	}
	require.Contains(t, stderr.String(), "third signal (terminated): exiting at once")
	stop()
	stop() // safe twice
}

// TestShutdownSignalRelayStops checks that stop ends the relay: it reads
// no more signals.
func TestShutdownSignalRelayStops(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal, 1)
	ctx, force, stop := relaySignals(context.Background(), sigs, &bytes.Buffer{}, func(int) { t.Error("exit called") })
	stop()
	require.Equal(t, context.Canceled, context.Cause(ctx), "stop releases the context")
	sigs <- os.Interrupt
	require.Len(t, sigs, 1, "nobody reads signals after stop")
	select {
	case <-force:
		t.Fatal("force closed without a signal")
	default:
	}
}
