package coordinator_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestMiddlewareOrder: Use(a, b) runs a, then b, then the handler, and
// returns through b, then a; a middleware may change what the handler
// returns (here b turns an error into a permanent one), and Use after
// Start is refused.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 1})
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	mw := func(name string) executor.Middleware {
		return func(next executor.Handler) executor.Handler {
			return func(ctx context.Context, job *executor.Job) error {
				note(name + " before")
				err := next(ctx, job)
				note(name + " after")
				if name == "b" && err != nil {
					return fairway.Permanent(err)
				}
				return err
			}
		}
	}
	ex.Use(mw("a"), mw("b"))
	ex.Handle("boom", func(context.Context, *executor.Job) error { note("handler"); return errors.New("boom") })
	require.NoError(t, ex.Start(t.Context()))
	require.Panics(t, func() { ex.Use(mw("c")) }, "Use after Start")

	id := submit(t, h, fairway.Submission{Group: "g", Task: "boom"})
	evs := h.final(id)
	last := evs[len(evs)-1]
	require.Equal(t, fairway.StateFailed, last.State, "b made the error permanent: no retry")
	require.Equal(t, 1, last.Attempt)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"a before", "b before", "handler", "b after", "a after"}, order)
}
