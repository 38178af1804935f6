package executor

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestProgressAtMostOnceASecond: a job's progress is taken to be sent at
// most once a second, its latest value then; all at a stop, and a job's
// own at its end, are taken at once.
func TestProgressAtMostOnceASecond(t *testing.T) {
	b := newLogBuffer(10)
	job := fairway.JobRef{Group: "g", ID: "j"}
	t0 := time.Unix(1000, 0)
	b.setProgress(job, 1, 10)
	require.Equal(t, 10, b.take(t0, false).progress[job].n, "the first at once")
	b.setProgress(job, 1, 20)
	b.setProgress(job, 1, 30)
	require.Empty(t, b.take(t0.Add(500*time.Millisecond), false).progress, "within a second of the last: held")
	require.Equal(t, 30, b.take(t0.Add(time.Second), false).progress[job].n, "then the latest")
	b.setProgress(job, 1, 40)
	require.Equal(t, 40, b.take(t0.Add(1100*time.Millisecond), true).progress[job].n, "everything, as the executor stops")
	b.setProgress(job, 1, 50)
	require.Equal(t, 50, b.takeJob(job).progress[job].n, "a job's own, at its end")
	require.Empty(t, b.sentAt, "forgotten once the job ended")
}

// TestLazyAttrsLogsAsWith: a logger with lazy attributes writes what
// slog.Logger.With's would, also through further attributes and groups,
// and leaves its base handler untouched while nothing gets through.
func TestLazyAttrsLogsAsWith(t *testing.T) {
	var want, got bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	attrs := []slog.Attr{slog.String("job_id", "j1"), slog.String("task", "t"), slog.Int("attempt", 2)}
	eager := slog.New(slog.NewJSONHandler(&want, opts)).With("job_id", "j1", "task", "t", "attempt", 2)
	lazy := withLazyAttrs(slog.NewJSONHandler(&got, opts), attrs...)
	for _, l := range []*slog.Logger{eager, lazy} {
		l.Debug("dropped")
		l.Info("job finished", "outcome", "success")
		l.With("k", 1).WithGroup("g").Warn("grouped", "v", true)
	}
	require.Equal(t, want.String(), got.String())
	require.Contains(t, got.String(), `{"level":"INFO","msg":"job finished","job_id":"j1","task":"t","attempt":2,"outcome":"success"}`)

	quiet := &lazyAttrs{base: slog.NewJSONHandler(&got, &slog.HandlerOptions{Level: slog.LevelWarn}), attrs: attrs}
	slog.New(quiet).Info("dropped")
	require.Nil(t, quiet.with, "the attributes are not added while every record is dropped")
}
