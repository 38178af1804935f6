// Package flight runs a computation at most once at a time per key: the
// callers that ask for a key while it is being computed wait for that
// computation's answer instead of starting their own (what
// golang.org/x/sync/singleflight does, for one type of key and value).
package flight

import (
	"context"
	"sync"
)

// Group computes values by key, at most once at a time per key. Its zero
// value is ready to use.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*call[V]
}

type call[V any] struct {
	done  chan struct{}
	value V
	err   error
	// waiters counts the callers that share this computation, the one
	// that runs it included.
	waiters int
}

// Do returns fn's answer for key: fn runs unless a computation of key is
// under way already, in which case Do waits for that one's answer. A
// caller whose ctx ends stops waiting (with ctx's error); the computation
// goes on for the others, so fn should not depend on the ctx of the
// caller that happened to start it. shared says whether the answer served
// more than one caller.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func() (V, error)) (v V, shared bool, err error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[K]*call[V]{}
	}
	c, ok := g.calls[key]
	if !ok {
		c = &call[V]{done: make(chan struct{})}
		g.calls[key] = c
		go func() {
			defer close(c.done)
			c.value, c.err = fn()
			g.mu.Lock()
			delete(g.calls, key)
			g.mu.Unlock()
		}()
	}
	c.waiters++
	g.mu.Unlock()
	select {
	case <-c.done:
		g.mu.Lock()
		shared = c.waiters > 1
		g.mu.Unlock()
		return c.value, shared, c.err
	case <-ctx.Done():
		var zero V
		return zero, false, ctx.Err()
	}
}

// InFlight says how many computations are under way.
func (g *Group[K, V]) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}
