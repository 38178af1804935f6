package coordinator_test

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/store"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestInsertTx: jobs stored in an application's own transaction exist only
// if it commits (a rollback leaves no job and no event), and run at the
// commit: the executor's own wake-up is an hour, so only the coordinators
// can have woken it (the journal's leader reads the tail at the commit's
// NOTIFY). An invalid submission fails the call naming it. InsertTx
// stores the jobs as a submitted row of the journal, in the caller's
// transaction.
func TestInsertTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, url := storetest.OpenURL(t)
	h, _ := setupOn(t, st, coordinator.Config{})
	client := h.client
	h.executor("ex1", 2, map[string]executor.Handler{"echo": echo}) // WakeupPeriod: an hour

	app, err := pgx.Connect(ctx, url) // the application's own connection
	require.NoError(t, err)
	t.Cleanup(func() { app.Close(ctx) })

	tx, err := app.Begin(ctx)
	require.NoError(t, err)
	ids, err := store.InsertTx(ctx, tx, store.TxOptions{}, fairway.Submission{Group: "g", Task: "echo", ID: "rolled-back"})
	require.NoError(t, err)
	require.Equal(t, []string{"rolled-back"}, ids)
	require.NoError(t, tx.Rollback(ctx))
	_, err = client.Get(ctx, "g", "rolled-back")
	require.ErrorIs(t, err, fairway.ErrNotFound, "a rollback leaves no job")

	tx, err = app.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TABLE invoice (id int)") // the application's own data
	require.NoError(t, err)
	_, err = store.InsertTx(ctx, tx, store.TxOptions{}, fairway.Submission{Group: "g", Task: "echo", Priority: "urgent"})
	require.ErrorIs(t, err, fairway.ErrInvalid)
	require.ErrorContains(t, err, "submission 0: priority")
	require.NoError(t, tx.Rollback(ctx))

	tx, err = app.Begin(ctx)
	require.NoError(t, err)
	ids, err = store.InsertTx(ctx, tx, store.TxOptions{},
		fairway.Submission{Group: "g", Task: "echo", Args: []byte(`{"n": 1}`)}, fairway.Submission{Group: "h", Task: "echo", Args: []byte(`{"n": 2}`)})
	require.NoError(t, err)
	require.Len(t, ids, 2)
	require.NoError(t, tx.Commit(ctx))
	first, final := map[string]events.Event{}, map[string]events.Event{}
	h.until(func(ev events.Event) bool {
		if _, ok := first[ev.JobID]; !ok {
			first[ev.JobID] = ev
		}
		if ev.State.Final() {
			final[ev.JobID] = ev
		}
		return len(final) == len(ids)
	})
	for _, id := range ids {
		require.Equal(t, fairway.StateSuccess, final[id].State)
		require.Equal(t, fairway.StateWaiting, first[id].State, "its events flow as any job's, from the first")
	}
	for _, ev := range received(h.events) {
		require.NotEqual(t, "rolled-back", ev.JobID, "a rolled back job has no event")
	}
}

// received returns the events already received and not yet read.
func received(ch chan events.Event) []events.Event {
	var out []events.Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}
