package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestWaitReturnsTheEndedJob: Wait, called at once after an asynchronous
// Submit (the job not stored yet, perhaps), returns the job once it ended:
// with its result when it succeeded, with its error when it failed (not as
// an error of Wait); a job that ended before the call comes back at once;
// a rejected submission is its rejection, naming the field; a job never
// submitted is not found when the wait runs out; a wait beyond the bound
// is refused.
func TestWaitReturnsTheEndedJob(t *testing.T) {
	t.Parallel()
	retries := 3
	h, coord := setupWith(t, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries})
	// Well within the wait a coordinator holds (events.MaxWaitMS): the
	// waits below end because the jobs' ends were heard, not because
	// their waits ran out.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	release := make(chan struct{})
	h.executor("ex1", 4, map[string]executor.Handler{
		"echo": func(ctx context.Context, job *executor.Job) error {
			<-release // the wait is held before the job ends
			return echo(ctx, job)
		},
		"fail": func(context.Context, *executor.Job) error { return fairway.Permanent(fmt.Errorf("no such invoice")) },
	})

	id, err := h.client.Submit(ctx, fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(`{"n":7}`)})
	require.NoError(t, err)
	// The wait verb as any client sends it, held for 30 s at most, with a
	// request timeout of 25: answered when the job's end is heard.
	waited := make(chan events.Reply, 1)
	go func() {
		msg, err := h.nc.Request(h.client.Subjects().API("acme", events.VerbWait), fmt.Appendf(nil, `{"id":%q,"wait_ms":30000}`, id), 25*time.Second)
		var reply events.Reply
		if err == nil {
			err = json.Unmarshal(msg.Data, &reply)
		}
		if err != nil {
			t.Errorf("the wait request: %v", err)
		}
		waited <- reply
	}()
	h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateRunning })
	// Held (its read found the job running) before the job ends: the end
	// reaches it as an event.
	require.Eventually(t, func() bool { return coord.WaitsHeld() == 1 }, 10*time.Second, 5*time.Millisecond)
	close(release)
	reply := <-waited
	require.Nil(t, reply.Error)
	job := reply.Job
	require.Equal(t, fairway.StateSuccess, job.State)
	require.JSONEq(t, `{"n":7}`, string(job.Result))

	again, err := h.client.Wait(ctx, "acme", id)
	require.NoError(t, err, "a job that ended already")
	require.Equal(t, fairway.StateSuccess, again.State)

	failed, err := h.client.Submit(ctx, fairway.Submission{Group: "acme", Task: "fail", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	job, err = h.client.Wait(ctx, "acme", failed)
	require.NoError(t, err, "a failed job is returned, not an error")
	require.Equal(t, fairway.StateFailed, job.State)
	require.Contains(t, job.Error, "no such invoice")

	// Published as any client could, past the Go client's checks: stored
	// never, refused with its field.
	publishRaw(t, h.nc, h.client.Subjects().Submit("acme", "echo"), []byte(`{"id":"bad-args","args":"not an object"}`))
	_, err = h.client.Wait(ctx, "acme", "bad-args")
	var fe *fairway.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, fairway.CodeInvalid, fe.Code)
	require.Equal(t, "args", fe.Field)

	// Rejected before the wait came (the client published, the ingest
	// refused it, then the client waited): its rejection all the same,
	// at once, not a wait that runs out not found.
	publishRaw(t, h.nc, h.client.Subjects().Submit("acme", "echo"), []byte(`{"id":"bad-early","priority":"urgent"}`))
	h.until(func(ev events.Event) bool { return ev.JobID == "bad-early" && ev.State == fairway.StateRejected })
	_, err = h.client.Wait(ctx, "acme", "bad-early")
	require.ErrorAs(t, err, &fe)
	require.Equal(t, fairway.CodeInvalid, fe.Code)
	require.Equal(t, "priority", fe.Field)
	// At once: a request timeout of 25 s against a wait of 30.
	msg, err := h.nc.Request(h.client.Subjects().API("acme", events.VerbWait), []byte(`{"id":"bad-early","wait_ms":30000}`), 25*time.Second)
	require.NoError(t, err)
	var early events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &early))
	require.NotNil(t, early.Error)
	require.Equal(t, "priority", early.Error.Field)

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	_, err = h.client.Wait(short, "acme", "never-submitted")
	require.ErrorIs(t, err, fairway.ErrNotFound)

	reply = h.request(h.client.Subjects().API("acme", events.VerbWait), fmt.Sprintf(`{"id":%q,"wait_ms":%d}`, id, events.MaxWaitMS+1))
	require.NotNil(t, reply.Error)
	require.Equal(t, "wait_ms", reply.Error.Field)
}

// TestWaitManyWaitsForEveryJob: a hundred jobs submitted asynchronously,
// waited for in one call, come back in the order of their ids, each ended
// with its own result.
func TestWaitManyWaitsForEveryJob(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	h.executor("ex1", 8, map[string]executor.Handler{"echo": echo})
	subs := make([]fairway.Submission, 100)
	for i := range subs {
		subs[i] = fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	ids, err := h.client.SubmitMany(ctx, subs)
	require.NoError(t, err)
	jobs, err := h.client.WaitMany(ctx, "acme", ids)
	require.NoError(t, err)
	require.Len(t, jobs, len(ids))
	for i, job := range jobs {
		require.Equal(t, ids[i], job.ID)
		require.Equal(t, fairway.StateSuccess, job.State)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(job.Result))
	}
}
