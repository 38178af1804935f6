package executor

import (
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
