package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// outbox drains the outbox and returns its events.
func outbox(t *testing.T, s *store.Store) []store.Event {
	t.Helper()
	var all []store.Event
	for {
		n, err := s.PublishEvents(t.Context(), 1000, func(evs []store.Event) error { all = append(all, evs...); return nil })
		require.NoError(t, err)
		if n == 0 {
			return all
		}
	}
}

// The numeric range that validation assumes is PostgreSQL's.
func TestNumericRangeMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	docs := []string{`{"x":1e131071}`, `{"x":1e131072}`, `{"x":1e-16383}`, `{"x":1e-16384}`, `{"x":0e99999999}`, `{"x":1}`, `{"x":1e1000000}`}
	raw := make([][]byte, len(docs))
	var want []int
	for i, d := range docs {
		raw[i] = []byte(d)
		sub := fairway.Submission{Args: json.RawMessage(d)}
		if sub.Normalize("g", "t", 1<<20, 1) != nil {
			want = append(want, i)
		}
	}
	bad, err := s.UnstorableJSON(ctx, raw)
	require.NoError(t, err)
	require.Equal(t, want, bad)
	require.Equal(t, []int{1, 3, 6}, bad)
}

// reject records a rejected submission of each group.
func reject(t *testing.T, s *store.Store, groups ...string) {
	t.Helper()
	var rs []store.Rejection
	for _, g := range groups {
		rs = append(rs, store.Rejection{JobID: fairway.NewID(), Group: g, Task: "t", Err: fairway.Invalid("args", "not an object")})
	}
	require.NoError(t, s.Reject(t.Context(), rs))
}

// TestRejectionsAreEventsCappedAndCleaned: a rejection is a rejected
// event in the outbox, in order, its fields cut to their bounds (a
// rejected id may be megabytes long: it never passed validation).
func TestRejectionsAreEventsCappedAndCleaned(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	long := strings.Repeat("x", 10*fairway.MaxIDLength)
	require.NoError(t, s.Reject(ctx, []store.Rejection{
		{JobID: "a1", Group: "a", Task: "t", Err: fairway.Invalid("args", "not an object")},
		{JobID: long, Group: "b", Task: "t", Err: &fairway.Error{Code: fairway.CodeInvalid, Field: "priority", Message: strings.Repeat("e", 2*fairway.MaxErrorTextSize)}},
	}))
	require.NoError(t, s.Reject(ctx, nil))
	evs := outbox(t, s)
	require.Len(t, evs, 2)
	require.Equal(t, "a1", evs[0].JobID)
	require.Equal(t, fairway.StateRejected, evs[0].State)
	require.Equal(t, "args", evs[0].Field)
	require.Equal(t, "not an object", evs[0].Error)
	require.True(t, strings.HasPrefix(evs[1].JobID, "xxxx"), evs[1].JobID)
	require.LessOrEqual(t, utf8.RuneCountInString(evs[1].JobID), fairway.MaxIDLength)
	require.Equal(t, "priority", evs[1].Field)
	require.LessOrEqual(t, len(evs[1].Error), fairway.MaxErrorTextSize)
}

// TestOneOutboxPublisherAtATime: a second publisher finds nothing while
// the first holds the outbox's events, and they are gone once it is done.
func TestOneOutboxPublisherAtATime(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	reject(t, s, "a", "b")
	inside, release := make(chan int), make(chan struct{})
	// Released when the test ends too, failed or not: the store's
	// connection pool closes after.
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let)
	first := make(chan error, 1)
	go func() {
		_, err := s.PublishEvents(ctx, 100, func(evs []store.Event) error {
			inside <- len(evs)
			<-release
			return nil
		})
		first <- err
	}()
	select {
	case n := <-inside:
		require.Equal(t, 2, n, "the first publisher has both events")
	case err := <-first:
		t.Fatalf("the first publisher returned without publishing: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first publisher never published")
	}
	n, err := s.PublishEvents(ctx, 100, func(evs []store.Event) error {
		t.Errorf("a second publisher got %d events while the first held the outbox", len(evs))
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, n)
	let()
	require.NoError(t, <-first)
	n, err = s.PublishEvents(ctx, 100, func([]store.Event) error { return nil })
	require.NoError(t, err)
	require.Zero(t, n, "the first publisher's events are gone")
}

// TestFailedPublishKeepsEvents: events whose publishing failed stay in
// the outbox for the next try.
func TestFailedPublishKeepsEvents(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	reject(t, s, "a")
	_, err := s.PublishEvents(ctx, 100, func([]store.Event) error { return fmt.Errorf("nats down") })
	require.ErrorContains(t, err, "nats down")
	n, err := s.PublishEvents(ctx, 100, func([]store.Event) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, n)
}
