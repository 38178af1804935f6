package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestListenJobsHearsCommits: ListenJobs is called at the commit of a
// transaction that stored jobs with InsertTx (PostgreSQL delivers a
// NOTIFY only at the commit, never for a rollback).
func TestListenJobsHearsCommits(t *testing.T) {
	t.Parallel()
	s, url := storetest.OpenURL(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	heard := make(chan struct{}, 100)
	go s.ListenJobs(ctx, func() { heard <- struct{}{} })
	app, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer app.Close(context.Background())
	insert := func() {
		t.Helper()
		tx, err := app.Begin(t.Context())
		require.NoError(t, err)
		_, err = store.InsertTx(t.Context(), tx, store.TxOptions{}, fairway.Submission{Group: "g", Task: "t"})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(t.Context()))
	}
	// The listener may not listen yet: commit until it hears one.
	deadline := time.Now().Add(20 * time.Second)
	for heardOne := false; !heardOne; {
		insert()
		select {
		case <-heard:
			heardOne = true
		case <-time.After(200 * time.Millisecond):
			require.True(t, time.Now().Before(deadline), "ListenJobs heard no commit")
		}
	}
}
