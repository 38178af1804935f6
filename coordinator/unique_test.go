package coordinator_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

// TestUniqueJobs: a second submission with the same unique_by values is
// refused naming the holder while the holder is not final (through the
// API, and as a rejected event through the stream); other values, and the
// same values in another group, are new jobs; once the holder ends, the
// values are free again.
func TestUniqueJobs(t *testing.T) {
	t.Parallel()
	uniqueJobs(t, setupRetrying(t))
}

// uniqueJobs is TestUniqueJobs on h's engine.
func uniqueJobs(t *testing.T, h *harness) {
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	sub := func(group, args string) fairway.Submission {
		return fairway.Submission{Group: group, Task: "echo", Args: []byte(args), RunAt: &later, UniqueBy: []string{"task", "args"}}
	}
	first, err := h.client.SubmitReply(ctx, sub("g", `{"report": "daily", "day": 25}`))
	require.NoError(t, err)
	_, err = h.client.SubmitReply(ctx, sub("g", `{"day":25,"report":"daily"}`))
	require.ErrorIs(t, err, fairway.ErrDuplicate)
	var fe *fairway.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "unique_by", fe.Field)
	require.Equal(t, first.ID, fe.JobID, "the refusal names the holder")

	other, err := h.client.SubmitReply(ctx, sub("g", `{"report": "daily", "day": 26}`))
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)
	_, err = h.client.SubmitReply(ctx, sub("h", `{"report": "daily", "day": 25}`))
	require.NoError(t, err, "another group's values are its own")

	// Through the stream: a rejected event names the holder.
	id, err := h.client.Submit(ctx, sub("g", `{"report": "daily", "day": 25}`))
	require.NoError(t, err)
	evs := h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateRejected })
	last := evs[len(evs)-1]
	require.Equal(t, fairway.CodeDuplicate, last.Code)
	require.Contains(t, last.Error, first.ID)

	_, err = h.client.Cancel(ctx, "g", first.ID)
	require.NoError(t, err)
	_, err = h.client.SubmitReply(ctx, sub("g", `{"report": "daily", "day": 25}`))
	require.NoError(t, err, "the holder ended: the values are free")
}
