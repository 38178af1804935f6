package flight_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/flight"
	"github.com/stretchr/testify/require"
)

// TestOneComputationPerKeyAtATime: callers of one key while it is computed
// share its answer; another key is computed on its own; once answered, the
// key is computed afresh.
func TestOneComputationPerKeyAtATime(t *testing.T) {
	var g flight.Group[string, int]
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	slow := func() (int, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return 42, nil
	}
	const callers = 10
	var wg sync.WaitGroup
	answers := make(chan int, callers)
	for range callers {
		wg.Go(func() {
			v, _, err := g.Do(t.Context(), "a", slow)
			require.NoError(t, err)
			answers <- v
		})
	}
	<-started
	// Every caller shares the computation before it ends: one that came
	// after would start another (and, released already, hang on started).
	require.Eventually(t, func() bool { return g.Waiters("a") == callers }, 10*time.Second, time.Millisecond)
	other, shared, err := g.Do(t.Context(), "b", func() (int, error) { return 7, nil })
	require.NoError(t, err)
	require.Equal(t, 7, other)
	require.False(t, shared)
	close(release)
	wg.Wait()
	close(answers)
	for v := range answers {
		require.Equal(t, 42, v)
	}
	require.EqualValues(t, 1, runs.Load(), "ten callers of one key, one computation")
	require.Zero(t, g.InFlight())

	v, _, err := g.Do(t.Context(), "a", func() (int, error) { return 43, nil })
	require.NoError(t, err)
	require.Equal(t, 43, v, "a key answered is computed again")
}

// TestWaiterGivesUpAlone: a caller whose context ends stops waiting; the
// computation goes on and answers the others.
func TestWaiterGivesUpAlone(t *testing.T) {
	var g flight.Group[string, int]
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		v, shared, err := g.Do(t.Context(), "k", func() (int, error) {
			close(started)
			<-release
			return 1, nil
		})
		if err == nil && (v != 1 || !shared) {
			err = errors.New("not the shared answer")
		}
		done <- err
	}()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := g.Do(ctx, "k", func() (int, error) { return 2, nil })
	require.ErrorIs(t, err, context.Canceled)
	close(release)
	require.NoError(t, <-done)
}
