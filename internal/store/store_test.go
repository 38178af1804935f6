package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var allTasks = []string{"t"}

func setup(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	return storetest.Open(t), t.Context()
}

func sub(group string, prio fairway.Priority) fairway.Submission {
	s := fairway.Submission{Group: group, Task: "t", Priority: prio}
	if err := s.Normalize("", "", fairway.DefaultMaxArgsSize, 3); err != nil {
		panic(err)
	}
	return s
}

func insert(t *testing.T, s *store.Store, subs ...fairway.Submission) []string {
	t.Helper()
	res, err := s.InsertJobs(t.Context(), subs, nil)
	require.NoError(t, err)
	ids := make([]string, len(res))
	for i, r := range res {
		require.Nil(t, r.Err)
		ids[i] = r.ID
	}
	return ids
}

func claim(t *testing.T, s *store.Store, worker string, n int) []fairway.Job {
	t.Helper()
	jobs, err := s.Claim(t.Context(), store.ClaimParams{Executor: worker, Limit: n, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.LessOrEqual(t, len(jobs), n, "never more jobs than free slots")
	return jobs
}

func groupsOf(jobs []fairway.Job) []string {
	var gs []string
	for _, j := range jobs {
		gs = append(gs, j.Group)
	}
	return gs
}

func priosOf(jobs []fairway.Job) string {
	var b []byte
	for _, j := range jobs {
		b = append(b, "HL"[map[fairway.Priority]int{fairway.PriorityHigh: 0, fairway.PriorityLow: 1}[j.Priority]])
	}
	return string(b)
}

// claimOneByOne claims n jobs with one claim each.
func claimOneByOne(t *testing.T, s *store.Store, n int) []fairway.Job {
	var jobs []fairway.Job
	for range n {
		jobs = append(jobs, claim(t, s, "w", 1)...)
	}
	return jobs
}

func TestRoundRobinOverGroups(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			s, _ := setup(t)
			// Group a submits everything first: FIFO would run a's jobs first.
			for _, g := range []string{"a", "a", "a", "a", "b", "b", "c", "c", "c"} {
				insert(t, s, sub(g, fairway.PriorityLow))
			}
			var jobs []fairway.Job
			if batch {
				jobs = claim(t, s, "w", 100)
			} else {
				jobs = claimOneByOne(t, s, 10)
			}
			require.Equal(t, []string{"a", "b", "c", "a", "b", "c", "a", "c", "a"}, groupsOf(jobs))
			// Within a group, oldest first.
			var aJobs []fairway.Job
			for _, j := range jobs {
				if j.Group == "a" {
					aJobs = append(aJobs, j)
				}
			}
			for i := 1; i < len(aJobs); i++ {
				require.True(t, aJobs[i-1].Submitted.Before(aJobs[i].Submitted))
			}
		})
	}
}

func TestRoundRobinContinuesAcrossClaims(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	for range 3 {
		insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow), sub("c", fairway.PriorityLow))
	}
	require.Equal(t, []string{"a", "b"}, groupsOf(claim(t, s, "w", 2)))
	require.Equal(t, []string{"c", "a"}, groupsOf(claim(t, s, "w", 2)))
	// A new group that sorts before the cursor waits for the wrap-around.
	insert(t, s, sub("0", fairway.PriorityLow))
	require.Equal(t, []string{"b", "c", "0", "a", "b", "c"}, groupsOf(claim(t, s, "w", 10)))
}

func TestCountingScheme(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			s, _ := setup(t)
			for range 10 {
				insert(t, s, sub("a", fairway.PriorityLow))
			}
			for range 10 {
				insert(t, s, sub("a", fairway.PriorityHigh))
			}
			var jobs []fairway.Job
			if batch {
				jobs = claim(t, s, "w", 20)
			} else {
				jobs = claimOneByOne(t, s, 20)
			}
			// 4,1: four high, one low, start over; when high runs out, low
			// is taken instead.
			require.Equal(t, "HHHHLHHHHLHHLLLLLLLL", priosOf(jobs))
		})
	}
}

func TestCountingSchemeFallsBackToOtherPriority(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	for range 3 {
		insert(t, s, sub("a", fairway.PriorityLow))
	}
	require.Equal(t, "LLL", priosOf(claimOneByOne(t, s, 3)))
	// The scheme moved on by three steps even so: the next asks are
	// H, L, H, H, H, H; with three of each, the last two fall back to low.
	for range 3 {
		insert(t, s, sub("a", fairway.PriorityHigh), sub("a", fairway.PriorityLow))
	}
	require.Equal(t, "HLHHLL", priosOf(claim(t, s, "w", 6)))
}

// fail runs the claimed job into an error outcome, as the executor would.
func fail(t *testing.T, s *store.Store, j fairway.Job, kind fairway.Outcome, delay time.Duration) store.Applied {
	t.Helper()
	ctx := t.Context()
	a := store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: j.Executor}
	require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: a}}))
	applied, err := s.Complete(ctx, []store.Outcome{{Attempt: a, Kind: kind, Error: "boom"}}, delay)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	return applied[0]
}

func TestDueStuckJobsComeFirst(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	first := insert(t, s, sub("a", fairway.PriorityLow))[0]
	j := claim(t, s, "w", 1)[0]
	require.Equal(t, first, j.ID)
	require.Equal(t, fairway.StateStuck, fail(t, s, j, "error", 0).State)
	// Newer waiting jobs, even of high priority, come after the due stuck one.
	insert(t, s, sub("a", fairway.PriorityHigh), sub("a", fairway.PriorityHigh))
	jobs := claim(t, s, "w", 3)
	require.Equal(t, first, jobs[0].ID)
	require.Equal(t, 2, jobs[0].Attempt)
	require.Len(t, jobs, 3)
}

func TestRetryDelaysAndAttempts(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	su := sub("a", fairway.PriorityLow)
	retries := 2
	su.MaxRetries = &retries
	id := insert(t, s, su)[0]
	delay := time.Hour
	for attempt := 1; attempt <= 3; attempt++ {
		jobs := claim(t, s, "w", 1)
		require.Len(t, jobs, 1, "attempt %d", attempt)
		require.Equal(t, attempt, jobs[0].Attempt)
		applied := fail(t, s, jobs[0], "error", delay)
		job, err := s.Get(ctx, "a", id)
		require.NoError(t, err)
		require.Equal(t, attempt, job.Retries)
		if attempt <= retries {
			require.Equal(t, fairway.StateStuck, applied.State)
			// retry-delay × 2^(retries-1), counted from the attempt's start.
			want := delay * time.Duration(1<<(attempt-1))
			require.Equal(t, want, job.RunAt.Sub(*job.Started))
			require.Empty(t, claim(t, s, "w", 1), "not due before its delay")
			makeDue(t, s, id)
		} else {
			require.Equal(t, fairway.StateFailed, applied.State, "N retries: N+1 attempts, then failed")
			require.NotNil(t, job.Finished)
			require.Equal(t, "boom", job.Error)
		}
	}
	require.Empty(t, claim(t, s, "w", 1))
}

// TestANewAttemptStartsAfresh (issue 22): a job run again, retried by
// itself (stuck) or by hand (failed), starts its new attempt with progress
// 0 and no error, from its claim on: the previous attempt's progress and
// error are not the running one's. That attempt's error stays in its event.
func TestANewAttemptStartsAfresh(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	run := func(attempt int) store.Attempt {
		t.Helper()
		jobs := claim(t, s, "w", 1)
		require.Len(t, jobs, 1, "attempt %d", attempt)
		j := jobs[0]
		require.Equal(t, attempt, j.Attempt)
		require.Zero(t, j.Progress, "the claim's job, attempt %d", attempt)
		require.Empty(t, j.Error, "the claim's job, attempt %d", attempt)
		a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "w"}
		require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: a}}))
		job, err := s.Get(ctx, "a", id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateRunning, job.State)
		require.Zero(t, job.Progress, "running attempt %d", attempt)
		require.Empty(t, job.Error, "running attempt %d", attempt)
		_, err = s.SetProgress(ctx, []store.Progress{{Attempt: a, Progress: 20 * attempt}})
		require.NoError(t, err)
		return a
	}
	end := func(a store.Attempt, kind fairway.Outcome, msg string, want fairway.State) {
		t.Helper()
		applied, err := s.Complete(ctx, []store.Outcome{{Attempt: a, Kind: kind, Error: msg}}, time.Hour)
		require.NoError(t, err)
		require.Len(t, applied, 1)
		require.Equal(t, want, applied[0].State)
		job, err := s.Get(ctx, "a", id)
		require.NoError(t, err)
		require.Equal(t, msg, job.Error, "an ended attempt's error stays on the job until the next one")
		require.Equal(t, 20*a.Attempt, job.Progress)
	}
	end(run(1), "error", "disk full", fairway.StateStuck)
	makeDue(t, s, id)
	end(run(2), "permanent", "bad input", fairway.StateFailed)
	_, err := s.Retry(ctx, "a", id)
	require.NoError(t, err)
	run(3)

	// Each attempt's error is in the event of its end; the claims carry none.
	errs := map[string]string{}
	_, err = s.PublishEvents(ctx, 100, func(evs []store.Event) error {
		for _, e := range evs {
			errs[fmt.Sprintf("%d %s", e.Attempt, e.State)] = e.Error
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0 waiting": "", "1 scheduled": "", "1 running": "", "1 stuck": "disk full",
		"2 scheduled": "", "2 running": "", "2 failed": "bad input", "2 waiting": "", "3 scheduled": "", "3 running": ""}, errs)
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow))
	require.Equal(t, fairway.StateFailed, fail(t, s, claim(t, s, "w", 1)[0], "permanent", time.Hour).State)
}

func TestLateResultIsRefused(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	j := claim(t, s, "old", 1)[0]
	expireLease(t, s, id)
	lost, err := s.ExpireLeases(ctx, 100, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Len(t, lost, 1)
	require.Equal(t, id, lost[0].JobID)
	require.Equal(t, fairway.StateStuck, lost[0].State)
	again := claim(t, s, "new", 1)
	require.Len(t, again, 1, "a lost job is due again at once")
	applied, err := s.Complete(ctx, []store.Outcome{{Attempt: store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "old"}, Kind: "success"}}, time.Hour)
	require.NoError(t, err)
	require.Empty(t, applied, "the old attempt's result must not apply")
	job, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateScheduled, job.State)
	require.Equal(t, "new", job.Executor)
	require.Equal(t, 1, job.Retries)
}

func TestDuplicateIDAndTracker(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	a := sub("a", fairway.PriorityLow)
	a.Tracker = "invoice-7"
	res, err := s.InsertJobs(ctx, []fairway.Submission{a, a}, nil)
	require.NoError(t, err)
	require.True(t, res[0].Created)
	require.False(t, res[1].Created, "the same id twice makes one job")
	require.Nil(t, res[1].Err)

	b := sub("a", fairway.PriorityLow)
	b.Tracker = "invoice-7"
	res, err = s.InsertJobs(ctx, []fairway.Submission{b}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, fairway.ErrDuplicate)
	require.Equal(t, a.ID, res[0].Err.JobID, "the reply names the job holding the tracker")

	// Once the first is final, the tracker is free again.
	_, err = s.Cancel(ctx, "a", a.ID)
	require.NoError(t, err)
	res, err = s.InsertJobs(ctx, []fairway.Submission{b}, nil)
	require.NoError(t, err)
	require.True(t, res[0].Created)
}

func TestConcurrentClaimsNeverShareAJob(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	var subs []fairway.Submission
	for i := range 300 {
		subs = append(subs, sub(fmt.Sprintf("g%d", i%7), fairway.PriorityLow))
	}
	insert(t, s, subs...)
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w)
			for {
				jobs, err := s.Claim(context.Background(), store.ClaimParams{Executor: worker, Limit: 7, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					if other, dup := seen[j.ID]; dup {
						t.Errorf("job %s handed to %s and %s", j.ID, other, worker)
					}
					seen[j.ID] = worker
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 300)
}

func TestClaimOnlyTasksTheExecutorRuns(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	other := sub("a", fairway.PriorityLow)
	other.Task = "other"
	insert(t, s, other, sub("a", fairway.PriorityLow))
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Limit: 5, Tasks: []string{"other"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, "other", jobs[0].Task)
}

// TestClaimOnlyGrantedGroups: an executor whose credential grants some
// groups gets only their jobs, in round-robin order among them, whatever
// other groups hold; granted none, it gets none.
func TestClaimOnlyGrantedGroups(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	for range 3 {
		insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow), sub("c", fairway.PriorityLow), sub("d", fairway.PriorityLow))
	}
	params := store.ClaimParams{Executor: "w", Limit: 4, Tasks: allTasks, Groups: []string{"d", "b"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
	jobs, err := s.Claim(ctx, params)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "d", "b", "d"}, groupsOf(jobs))
	params.Groups = []string{}
	jobs, err = s.Claim(ctx, params)
	require.NoError(t, err)
	require.Empty(t, jobs, "granted no group")
	// The others' jobs are all there for an executor granted every group.
	require.Equal(t, []string{"a", "b", "c", "d", "a", "c", "a", "c"}, groupsOf(claim(t, s, "w2", 10)))
}

func TestEventsFollowEachChangeInOrder(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	j := claim(t, s, "w", 1)[0]
	a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "w"}
	require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: a}}))
	_, err := s.Complete(ctx, []store.Outcome{{Attempt: a, Kind: "success", Result: []byte(`{"n":1}`)}}, time.Second)
	require.NoError(t, err)
	var got []string
	n, err := s.PublishEvents(ctx, 100, func(evs []store.Event) error {
		for _, e := range evs {
			require.Equal(t, id, e.JobID)
			got = append(got, string(e.PreviousState)+">"+string(e.State))
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>success"}, got)
	// Published events are gone from the outbox.
	n, err = s.PublishEvents(ctx, 100, func([]store.Event) error { return nil })
	require.NoError(t, err)
	require.Zero(t, n)
	job, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(job.Result))
	require.Equal(t, 100, job.Progress)
}

// TestOneOutboxPublisherAtATime: while one publisher holds the outbox
// (its events on their way to JetStream), another reads nothing and
// publishes nothing; once the first has committed, its events are gone.
func TestOneOutboxPublisherAtATime(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow))
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

// TestEventPacks: the statements on a job's path write one outbox row per
// statement (a pack); published, each event has its own id and fields, in
// statement order, and a read's limit never splits a pack.
func TestEventPacks(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	ids := insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow), sub("a", fairway.PriorityLow))
	jobs := claim(t, s, "w", 3)
	require.Len(t, jobs, 3)
	var outcomes []store.Outcome
	started := time.Now().UTC().Truncate(time.Microsecond) // after the claim
	for i, j := range jobs {
		o := store.Outcome{Attempt: store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: "w"}, Kind: "success"}
		if i == 1 {
			o.Kind, o.Error, o.StartedAt = "error", "boom", &started
		}
		outcomes = append(outcomes, o)
	}
	require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: outcomes[0].Attempt}, {Attempt: outcomes[2].Attempt}}))
	_, err := s.Complete(ctx, outcomes, time.Hour)
	require.NoError(t, err)

	// A limit of 2 events still reads the first pack whole (3 events).
	var got []store.Event
	n, err := s.PublishEvents(ctx, 2, func(evs []store.Event) error { got = append(got, evs...); return nil })
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for {
		n, err := s.PublishEvents(ctx, 2, func(evs []store.Event) error { got = append(got, evs...); return nil })
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	seen := map[string]bool{}
	var lines []string
	for _, e := range got {
		require.False(t, seen[e.ID], "event id %s twice", e.ID)
		seen[e.ID] = true
		require.NotZero(t, e.Time)
		require.Equal(t, "t", e.Task)
		line := fmt.Sprintf("%s/%s %s>%s", e.Group, e.JobID, e.PreviousState, e.State)
		if e.Error != "" {
			line += " " + e.Error
		}
		if e.State != fairway.StateWaiting {
			require.Equal(t, "w", e.Executor, line)
			require.Equal(t, 1, e.Attempt, line)
		}
		lines = append(lines, line)
	}
	// The ingest's events come in the order its rows were written (by group and id).
	slices.Sort(lines[:3])
	j0, j1, j2 := jobs[0], jobs[1], jobs[2]
	name := func(j fairway.Job) string { return j.Group + "/" + j.ID }
	require.Equal(t, []string{
		"a/" + ids[0] + " >waiting", "a/" + ids[2] + " >waiting", "b/" + ids[1] + " >waiting",
		name(j0) + " waiting>scheduled", name(j1) + " waiting>scheduled", name(j2) + " waiting>scheduled",
		name(j0) + " scheduled>running", name(j2) + " scheduled>running",
		name(j0) + " running>success", name(j1) + " scheduled>running", name(j1) + " running>stuck boom", name(j2) + " running>success",
	}, lines)
	// The start reported with the end is the running event's time.
	for _, e := range got {
		if e.JobID == j1.ID && e.State == fairway.StateRunning {
			require.True(t, started.Equal(e.Time), "running at %s, reported %s", e.Time, started)
		}
	}
}

func TestFailedPublishKeepsEvents(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow))
	_, err := s.PublishEvents(ctx, 100, func([]store.Event) error { return fmt.Errorf("nats down") })
	require.ErrorContains(t, err, "nats down")
	n, err := s.PublishEvents(ctx, 100, func([]store.Event) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func makeDue(t *testing.T, s *store.Store, id string)     { s.SetDue(t, id) }
func expireLease(t *testing.T, s *store.Store, id string) { s.ExpireLease(t, id) }

func TestStartAndEndReportedTogether(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	j := claim(t, s, "w", 1)[0]
	startedAt := time.Now().UTC().Truncate(time.Microsecond)
	applied, err := s.Complete(ctx, []store.Outcome{{Attempt: store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "w"},
		Kind: "error", Error: "boom", StartedAt: &startedAt}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	job, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateStuck, job.State)
	require.True(t, startedAt.Equal(*job.Started), "the reported start is recorded")
	require.Equal(t, time.Hour, job.RunAt.Sub(startedAt), "the retry delay counts from the reported start")
	var got []string
	_, err = s.PublishEvents(ctx, 100, func(evs []store.Event) error {
		for _, e := range evs {
			got = append(got, string(e.PreviousState)+">"+string(e.State))
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>stuck"}, got)
}

// TestReportedStartsStayWithinTheClaimAndNow: a start report's time (the
// executor's clock) is the attempt's start, whether reported on its own or
// with the end, but never before the job was handed out nor after the
// report arrived: a clock ahead or behind, or a false time, cannot stretch
// or shrink the slot-time the fair shares count.
func TestReportedStartsStayWithinTheClaimAndNow(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	for _, tc := range []struct {
		name     string
		offset   time.Duration // from the claim's end, by this process's clock
		together bool          // reported with the end
	}{
		{"kept", 0, false}, {"kept with the end", 0, true},
		{"before the claim", -time.Hour, false}, {"before the claim, with the end", -time.Hour, true},
		{"in the future", time.Hour, false}, {"in the future, with the end", time.Hour, true},
	} {
		id := insert(t, s, sub("a", fairway.PriorityLow))[0]
		before := time.Now()
		j := claim(t, s, "w", 1)[0]
		claimed := time.Now()
		at := claimed.Add(tc.offset).UTC().Truncate(time.Microsecond)
		a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "w"}
		if tc.together {
			_, err := s.Complete(ctx, []store.Outcome{{Attempt: a, Kind: "success", StartedAt: &at}}, time.Hour)
			require.NoError(t, err)
		} else {
			require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: a, At: at}}))
		}
		reported := time.Now()
		job, err := s.Get(ctx, "a", id)
		require.NoError(t, err, tc.name)
		require.NotNil(t, job.Started, tc.name)
		switch {
		case tc.offset == 0:
			require.True(t, at.Equal(*job.Started), "%s: started %s, reported %s", tc.name, job.Started, at)
		case tc.offset < 0:
			require.True(t, !job.Started.Before(before) && !job.Started.After(claimed), "%s: started %s, claimed within %s..%s", tc.name, job.Started, before, claimed)
		default:
			require.True(t, !job.Started.Before(claimed) && !job.Started.After(reported), "%s: started %s, reported within %s..%s", tc.name, job.Started, claimed, reported)
		}
	}
}

func TestLeaseOfALiveExecutorWaitsForItsReport(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "live", Instance: "i1", Slots: 1, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	claim(t, s, "live", 1)
	expireLease(t, s, id)
	lost, err := s.ExpireLeases(ctx, 100, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Empty(t, lost, "its executor still sends heartbeats: the end may be on its way")
	s.SilenceExecutor(t, "live")
	lost, err = s.ExpireLeases(ctx, 100, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Len(t, lost, 1, "a silent executor's job is lost")
}

// TestReportBatchesFindJobsByPrimaryKey: statistics taken while a backlog
// waits say almost no job is held. The statements applying a batch of
// reports must still find each job by its primary key; when they used the
// held-jobs index instead, each report scanned every held job, and a batch
// of 10,000 outcomes took 11 s instead of 0.2 s (BenchmarkComplete).
func TestReportBatchesFindJobsByPrimaryKey(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	subs := make([]fairway.Submission, 3000)
	for i := range subs {
		subs[i] = sub(fmt.Sprintf("g%d", i%10), fairway.PriorityHigh)
	}
	insert(t, s, subs...)
	require.NoError(t, s.Analyze(ctx))
	jobs := claim(t, s, "w", 500)
	require.Len(t, jobs, 500)
	atts := make([]store.Attempt, len(jobs))
	for i, j := range jobs {
		atts[i] = store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: "w"}
	}
	for name, plan := range s.BatchPlans(t, atts) {
		require.Contains(t, plan, "fairway_job_pkey", "%s: look-up by primary key\n%s", name, plan)
		require.NotContains(t, plan, "fairway_job_held", "%s: no scan of the held jobs per report\n%s", name, plan)
		require.NotContains(t, plan, "Seq Scan on fairway_job", "%s: no scan of the whole job table\n%s", name, plan)
	}
	outcomes := make([]store.Outcome, len(atts))
	for i, a := range atts {
		outcomes[i] = store.Outcome{Attempt: a, Kind: "success"}
	}
	applied, err := s.Complete(ctx, outcomes, time.Second)
	require.NoError(t, err)
	require.Len(t, applied, len(outcomes))
}

// TestClaimMarkingFindsJobsByPrimaryKey: a coordinator's connections
// cache the claim's marking statement with its generic plan, made on the
// table as it was then. Made on a small table, without statistics, that
// plan joined the chosen ids to a sequential scan of every job, and kept
// doing so as the table grew: 3 ms for each claim of a few jobs among
// 20,000 (the fairness benchmark's backlog).
func TestClaimMarkingFindsJobsByPrimaryKey(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow))
	plan := s.ClaimMarkPlan(t)
	// A look-up per chosen id, not a join over a scan of the table (or of
	// its whole primary key).
	require.Contains(t, plan, "Nested Loop", "a look-up per chosen job\n%s", plan)
	require.Regexp(t, `Index Scan using fairway_job_pkey on fairway_job j\s.*\n\s+Index Cond: \(\(group_name = c\.group_name\) AND \(id = c\.id\)\)`, plan,
		"the marking looks each job up by primary key\n%s", plan)
	require.NotContains(t, plan, "Seq Scan on fairway_job", "no scan of the whole job table\n%s", plan)
}

// TestClaimForAnUnregisteredInstance: it fails with not_registered, claims
// nothing and leaves the round-robin cursor where it was.
func TestClaimForAnUnregisteredInstance(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow))
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "now", Slots: 1, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	p := store.ClaimParams{Executor: "w", Instance: "gone", Limit: 1, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
	jobs, err := s.Claim(ctx, p)
	require.ErrorIs(t, err, fairway.ErrNotRegistered)
	require.Empty(t, jobs)
	p.Instance = "now"
	jobs, err = s.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, groupsOf(jobs), "the refused claim did not move the cursor")
}

// TestClaimUnderTheSameIDReturnsItsJobs: a claim under an id that already
// claimed jobs, still scheduled, returns those and claims nothing new,
// whether it is the executor's request sent again or the first one served
// late; another id claims new jobs.
func TestClaimUnderTheSameIDReturnsItsJobs(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow), sub("c", fairway.PriorityLow))
	p := store.ClaimParams{Executor: "w", ClaimID: "r1", Limit: 2, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
	first, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, groupsOf(first))
	reclaimed := 0
	p.Reclaimed = func(n int) { reclaimed = n }
	again, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, 2, reclaimed)
	require.ElementsMatch(t, []string{first[0].ID, first[1].ID}, []string{again[0].ID, again[1].ID})
	for _, j := range again {
		require.Equal(t, 1, j.Attempt, "the same attempt")
		require.Equal(t, fairway.StateScheduled, j.State)
	}
	p.ClaimID, reclaimed = "r2", 0
	next, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.Zero(t, reclaimed)
	require.Equal(t, []string{"c"}, groupsOf(next))
}

// TestIDsAndTrackersArePerGroup: a job is named by its group and id. A
// group may use an id or a tracker that another group uses: it gets a job
// of its own, and nothing of the other group's is returned, blocked or
// named.
func TestIDsAndTrackersArePerGroup(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	a := sub("a", fairway.PriorityLow)
	a.ID, a.Tracker, a.Args = "shared-id", "shared-tracker", []byte(`{"secret":"a"}`)
	b := sub("b", fairway.PriorityLow)
	b.ID, b.Tracker, b.Args = "shared-id", "shared-tracker", []byte(`{"mine":"b"}`)
	res, err := s.InsertJobs(ctx, []fairway.Submission{a, b}, nil)
	require.NoError(t, err)
	require.True(t, res[0].Created)
	require.True(t, res[1].Created, "another group's id and tracker do not block this group's job")
	require.Nil(t, res[1].Err)

	for _, want := range []fairway.Submission{a, b} {
		job, err := s.Get(ctx, want.Group, "shared-id")
		require.NoError(t, err)
		require.Equal(t, want.Group, job.Group)
		require.JSONEq(t, string(want.Args), string(job.Args))
	}
	_, err = s.Get(ctx, "", "shared-id")
	require.ErrorIs(t, err, fairway.ErrNotFound, "no group is no group, not any group")
	_, err = s.Get(ctx, "c", "shared-id")
	require.ErrorIs(t, err, fairway.ErrNotFound)

	// The same id again in b is a duplicate of b's job, not of a's.
	again := b
	again.Args = []byte(`{"other":1}`)
	res, err = s.InsertJobs(ctx, []fairway.Submission{again}, nil)
	require.NoError(t, err)
	require.False(t, res[0].Created)
	require.Nil(t, res[0].Err)

	// A held tracker is refused within the group, naming the group's own job.
	c := sub("b", fairway.PriorityLow)
	c.Tracker = "shared-tracker"
	res, err = s.InsertJobs(ctx, []fairway.Submission{c}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, fairway.ErrDuplicate)
	require.Equal(t, "shared-id", res[0].Err.JobID)
	job, err := s.Get(ctx, "b", res[0].Err.JobID)
	require.NoError(t, err, "the holder named is a job of the same group")
	require.Equal(t, "b", job.Group)

	// Changing a's job leaves b's alone.
	_, err = s.Cancel(ctx, "a", "shared-id")
	require.NoError(t, err)
	job, err = s.Get(ctx, "b", "shared-id")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)
	_, err = s.Cancel(ctx, "c", "shared-id")
	require.ErrorIs(t, err, fairway.ErrNotFound)
}

// TestReportsApplyOnlyFromTheHoldingInstance: starts, progress, log lines
// and outcomes apply only when they name the job's group and current
// attempt and come from the executor instance holding it; forged ones
// (another instance, another app-id, another group) change nothing.
func TestReportsApplyOnlyFromTheHoldingInstance(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 2, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	victim := sub("a", fairway.PriorityLow)
	victim.ID = "job-1"
	twin := sub("b", fairway.PriorityLow)
	twin.ID = "job-1"
	insert(t, s, victim, twin)
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", Limit: 1, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	j := jobs[0]
	require.Equal(t, "a", j.Group)
	held := store.Attempt{Group: "a", JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: "i1"}
	forged := []store.Attempt{
		{Group: "a", JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: "i2"},    // another instance
		{Group: "a", JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: ""},      // none
		{Group: "a", JobID: j.ID, Attempt: j.Attempt, Executor: "evil", Instance: "i1"}, // another app-id
		{Group: "b", JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: "i1"},    // another group's job
		{Group: "a", JobID: j.ID, Attempt: 0, Executor: "w", Instance: "i1"},            // no attempt
	}
	for _, f := range forged {
		require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: f}}))
		_, err := s.SetProgress(ctx, []store.Progress{{Attempt: f, Progress: 66}})
		require.NoError(t, err)
		require.NoError(t, s.AppendLogs(ctx, []store.AttemptLog{{Attempt: f, Lines: []fairway.LogLine{{Level: "info", Message: "forged", Time: time.Now()}}}}))
		applied, err := s.Complete(ctx, []store.Outcome{{Attempt: f, Kind: "success", Result: []byte(`{"forged":true}`)}}, time.Hour)
		require.NoError(t, err)
		require.Empty(t, applied, "forged outcome %+v", f)
	}
	for _, group := range []string{"a", "b"} {
		job, err := s.Get(ctx, group, "job-1")
		require.NoError(t, err)
		require.NotEqual(t, fairway.StateRunning, job.State, group)
		require.False(t, job.State.Final(), group)
		require.Zero(t, job.Progress, group)
		logs, err := s.Logs(ctx, group, "job-1")
		require.NoError(t, err)
		require.Empty(t, logs, group)
	}

	require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: held}}))
	_, err = s.SetProgress(ctx, []store.Progress{{Attempt: held, Progress: 50}})
	require.NoError(t, err)
	require.NoError(t, s.AppendLogs(ctx, []store.AttemptLog{{Attempt: held, Lines: []fairway.LogLine{{Level: "info", Message: "real", Time: time.Now()}}}}))
	applied, err := s.Complete(ctx, []store.Outcome{{Attempt: held, Kind: "success", Result: []byte(`{"real":true}`)}}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, []store.Applied{{Group: "a", JobID: "job-1", State: fairway.StateSuccess, RunAt: applied[0].RunAt, NoDependents: true}}, applied)
	job, err := s.Get(ctx, "a", "job-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"real":true}`, string(job.Result))
	logs, err := s.Logs(ctx, "a", "job-1")
	require.NoError(t, err)
	require.Len(t, logs, 1)
	require.Equal(t, "real", logs[0].Message)
	require.Equal(t, "a", logs[0].Group)
	twinJob, err := s.Get(ctx, "b", "job-1")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, twinJob.State, "the other group's job of the same id is untouched")
}

// TestHeartbeatExtendsOnlyTheInstancesLeases: a heartbeat renews the leases
// of the jobs it names only where its instance holds them.
func TestHeartbeatExtendsOnlyTheInstancesLeases(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	for _, inst := range []string{"i1"} {
		_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: inst, Slots: 1, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
		require.NoError(t, err)
	}
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", Limit: 1, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	expireLease(t, s, id)
	require.NoError(t, s.ExtendLeases(ctx, "w", "i2", []fairway.JobRef{{Group: "a", ID: id}}, time.Hour))
	require.NoError(t, s.ExtendLeases(ctx, "w", "i1", []fairway.JobRef{{Group: "b", ID: id}}, time.Hour))
	job, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.True(t, job.LeaseUntil.Before(time.Now()), "not renewed by another instance or another group's name")
	require.NoError(t, s.Heartbeat(ctx, "w", "i1", []fairway.JobRef{{Group: "a", ID: id}}, time.Hour))
	job, err = s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.True(t, job.LeaseUntil.After(time.Now().Add(30*time.Minute)), "renewed by its holder")
}

// TestInsertJobsForHandsJobsToAnIdleExecutor: the submissions an
// assignment names are stored scheduled for its executor in the same
// statement (attempt 1, leased, its request's claim id), with a
// submission's and a claim's events, and returned as a claim would; the
// others are stored waiting. For an instance that is not the registered
// one they are all stored waiting, and none is handed over.
func TestInsertJobsForHandsJobsToAnIdleExecutor(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 2, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	subs := []fairway.Submission{sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow), sub("a", fairway.PriorityHigh)}
	for i := range subs {
		require.NoError(t, subs[i].Normalize("", "", 1<<20, 3))
	}
	a := &store.Assignment{Executor: "w", Instance: "i1", ClaimID: "req-1", Lease: time.Minute, Jobs: []int{0, 2}}
	res, handed, err := s.InsertJobsFor(ctx, subs, nil, a)
	require.NoError(t, err)
	for _, r := range res {
		require.True(t, r.Created)
	}
	require.Len(t, handed, 2)
	for k, i := range []int{0, 2} {
		j := handed[k]
		require.Equal(t, subs[i].ID, j.ID)
		require.Equal(t, fairway.StateScheduled, j.State)
		require.Equal(t, 1, j.Attempt)
		require.Equal(t, "w", j.Executor)
		require.NotNil(t, j.LeaseUntil)
		stored, err := s.Get(ctx, j.Group, j.ID)
		require.NoError(t, err)
		require.Equal(t, fairway.StateScheduled, stored.State)
		require.Equal(t, 1, stored.Attempt)
		require.Equal(t, "w", stored.Executor)
		require.True(t, stored.Submitted.Equal(j.Submitted), "stored %s, handed %s", stored.Submitted, j.Submitted)
		require.True(t, stored.LeaseUntil.Equal(*j.LeaseUntil))
	}
	other, err := s.Get(ctx, "b", subs[1].ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, other.State)
	// The claim's id: the executor asking again under it gets them back.
	again, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", ClaimID: "req-1", Limit: 5, Tasks: allTasks, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, again, 2)
	// Their start and end apply as for claimed jobs.
	began := time.Now().UTC()
	_, err = s.Complete(ctx, []store.Outcome{{Attempt: store.Attempt{Group: "a", JobID: subs[0].ID, Attempt: 1, Executor: "w", Instance: "i1"}, Kind: "success",
		StartedAt: &began}}, time.Second)
	require.NoError(t, err)
	var lines []string
	_, err = s.PublishEvents(ctx, 100, func(evs []store.Event) error {
		for _, e := range evs {
			lines = append(lines, fmt.Sprintf("%s %s>%s %d %s", e.JobID, e.PreviousState, e.State, e.Attempt, e.Executor))
			require.True(t, store.Allowed(e.PreviousState, e.State), "%s → %s", e.PreviousState, e.State)
		}
		return nil
	})
	require.NoError(t, err)
	require.Subset(t, lines, []string{
		subs[0].ID + " >waiting 0 ", subs[0].ID + " waiting>scheduled 1 w",
		subs[1].ID + " >waiting 0 ",
		subs[2].ID + " >waiting 0 ", subs[2].ID + " waiting>scheduled 1 w",
		subs[0].ID + " scheduled>running 1 w", subs[0].ID + " running>success 1 w",
	})
	require.Len(t, lines, 7)
	require.Less(t, slices.Index(lines, subs[0].ID+" >waiting 0 "), slices.Index(lines, subs[0].ID+" waiting>scheduled 1 w"))

	// Another instance than the registered one: stored waiting, none handed.
	more := []fairway.Submission{sub("a", fairway.PriorityLow)}
	require.NoError(t, more[0].Normalize("", "", 1<<20, 3))
	_, handed, err = s.InsertJobsFor(ctx, more, nil, &store.Assignment{Executor: "w", Instance: "old", ClaimID: "req-2", Lease: time.Minute, Jobs: []int{0}})
	require.NoError(t, err)
	require.Empty(t, handed)
	j, err := s.Get(ctx, "a", more[0].ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, j.State)
	require.Zero(t, j.Attempt)
	// Not while a concurrency limit exists: a claim applies it.
	err = s.SetLimit(ctx, "task", "t", 5)
	require.NoError(t, err)
	limited := []fairway.Submission{sub("a", fairway.PriorityLow)}
	require.NoError(t, limited[0].Normalize("", "", 1<<20, 3))
	_, handed, err = s.InsertJobsFor(ctx, limited, nil, &store.Assignment{Executor: "w", Instance: "i1", ClaimID: "req-4", Lease: time.Minute, Jobs: []int{0}})
	require.NoError(t, err)
	require.Empty(t, handed, "a limit exists")
	j, err = s.Get(ctx, "a", limited[0].ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, j.State)
	// A duplicate is not handed over again.
	_, handed, err = s.InsertJobsFor(ctx, subs[:1], nil, &store.Assignment{Executor: "w", Instance: "i1", ClaimID: "req-3", Lease: time.Minute, Jobs: []int{0}})
	require.NoError(t, err)
	require.Empty(t, handed)
}

// TestMaintenanceLead: one holder at a time; the holder renews it under
// the same term; another takes it once it is given up or its lease runs
// out, under the next term.
func TestMaintenanceLead(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	term, leads, err := s.LeadMaintenance(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, leads)
	_, leads, err = s.LeadMaintenance(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, leads, "a holds it")
	again, leads, err := s.LeadMaintenance(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, leads)
	require.Equal(t, term, again, "renewed under the same term")
	require.NoError(t, s.ReleaseMaintenance(ctx, "b"), "b holds nothing to give up")
	_, leads, err = s.LeadMaintenance(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, leads)
	require.NoError(t, s.ReleaseMaintenance(ctx, "a"))
	next, leads, err := s.LeadMaintenance(ctx, "b", 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, leads)
	require.Equal(t, term+1, next)
	// b's short lease runs out: a takes it back, under the next term.
	require.Eventually(t, func() bool {
		_, leads, err := s.LeadMaintenance(ctx, "a", time.Minute)
		return err == nil && leads
	}, 5*time.Second, 20*time.Millisecond)
}

// TestHeartbeatDoesNotExtendPastTheTimeout: a running job with a timeout
// keeps its lease, whatever its executor heartbeats, only until its start
// plus its timeout plus a lease: a holder that never ends it loses it then.
// A job without a timeout is renewed as asked.
func TestHeartbeatDoesNotExtendPastTheTimeout(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 2, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	timed := sub("a", fairway.PriorityLow)
	timed.Timeout = "10s"
	ids := insert(t, s, timed, sub("b", fairway.PriorityLow))
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", Limit: 2, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	for _, id := range ids {
		s.StartedAgo(t, id, time.Hour)
	}
	require.NoError(t, s.Heartbeat(ctx, "w", "i1", []fairway.JobRef{{Group: "a", ID: ids[0]}, {Group: "b", ID: ids[1]}}, time.Minute))
	job, err := s.Get(ctx, "a", ids[0])
	require.NoError(t, err)
	require.True(t, job.LeaseUntil.Before(time.Now()), "renewed past its timeout: %s", job.LeaseUntil)
	other, err := s.Get(ctx, "b", ids[1])
	require.NoError(t, err)
	require.True(t, other.LeaseUntil.After(time.Now().Add(30*time.Second)), "a job without a timeout is renewed")
}

// TestHeartbeatHoldsNoJobForEver: a job without a timeout is renewed up
// to the longest timeout a job may have (fairway.MaxTimeout) after its
// start; a job handed over and never started, up to store.MaxHold after
// its hand-over, however the executor heartbeats or asks again under the
// same dispatch request.
func TestHeartbeatHoldsNoJobForEver(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 4, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	ids := insert(t, s, sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow), sub("c", fairway.PriorityLow))
	params := store.ClaimParams{Executor: "w", Instance: "i1", ClaimID: "req-1", Limit: 3, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
	jobs, err := s.Claim(ctx, params)
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	s.StartedAgo(t, ids[0], fairway.MaxTimeout+time.Hour)
	s.ScheduledAgo(t, ids[1], store.MaxHold+time.Minute)
	held := []fairway.JobRef{{Group: "a", ID: ids[0]}, {Group: "b", ID: ids[1]}, {Group: "c", ID: ids[2]}}
	require.NoError(t, s.Heartbeat(ctx, "w", "i1", held, time.Minute))
	lease := func(group, id string) time.Time {
		job, err := s.Get(ctx, group, id)
		require.NoError(t, err)
		require.NotNil(t, job.LeaseUntil)
		return *job.LeaseUntil
	}
	require.True(t, lease("a", ids[0]).Before(time.Now()), "a job without a timeout renewed past the longest timeout")
	require.True(t, lease("b", ids[1]).Before(time.Now()), "a job held unstarted renewed past MaxHold")
	require.True(t, lease("c", ids[2]).After(time.Now().Add(30*time.Second)), "a job handed over now is renewed")
	// Asking again under the same request id hands them out again: not
	// with a lease past the hold either.
	again, err := s.Claim(ctx, params)
	require.NoError(t, err)
	for _, j := range again {
		if j.ID == ids[1] {
			require.True(t, j.LeaseUntil != nil && j.LeaseUntil.Before(time.Now()), "a reclaim renewed a job held past MaxHold")
		}
	}
}
