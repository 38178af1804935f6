// Package storeaccess hands the engine behind a public *store.Store to
// Fairway's own packages (the coordinator, the tools, the tests) without
// exposing it to the users of package store: an internal package cannot
// be imported from outside the module.
//
// The public package store sets both functions in its init; any package
// that can name a *store.Store has imported store, so they are set before
// anything calls them.
package storeaccess

import "github.com/fairwayhq/fairway/internal/store"

var (
	// Engine returns the engine of a public *store.Store (passed as any,
	// since this package cannot import the public one).
	Engine func(public any) *store.Store
	// Public wraps an engine in a public *store.Store (returned as any):
	// for the tests and tools that open the engine themselves.
	Public func(engine *store.Store) any
)
