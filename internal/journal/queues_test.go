package journal_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestClaimsFromMemoryPickWhatTheRowEngineClaims is condition 5 of issue
// 31 for the leader's queues: random histories run on the row engine
// (submissions of six groups, three tasks and both priorities, some not
// due or pending; claims of random sizes, tasks and granted groups, with
// and without concurrency limits; ends that succeed, fail into stuck
// jobs or give the job back; cancels), while the journal the mirror
// writes is folded into a State and its Queues. Before every claim the
// leader's claim from memory, from the row engine's cursor (and, with
// weights or time shares, its groups' virtual times, weights and run
// times; and the cluster's concurrency limits with the jobs held as the
// journal's state counts them), must pick exactly the jobs the row engine
// then claims, and leave the cursor (and the shares' clock) where it
// leaves it. Seeds 0 and 1 count jobs round-robin, 2 and 3 with weights,
// 4 and 5 share time (with weights, and run times learned from the
// ends); odd seeds set and remove limits of tasks and groups as they go.
func TestClaimsFromMemoryPickWhatTheRowEngineClaims(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			weighted, byTime, limited := seed >= 2, seed >= 4, seed%2 == 1
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(seed, 31)) //nolint:gosec // a test's reproducible randomness
			s, url := storetest.OpenURL(t)
			db, err := pgxpool.New(ctx, url)
			require.NoError(t, err)
			t.Cleanup(db.Close)
			_, err = s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i", Slots: 100, Tasks: []string{"t0", "t1", "t2"}}, time.Hour,
				func(fairway.Executor) bool { return false })
			require.NoError(t, err)

			state, tail := journal.NewState(), &journal.Tail{}
			micros := func() int64 { return time.Now().UnixMicro() }
			queues := journal.NewQueues(state, micros())
			fold := func() {
				for {
					rows, err := tail.Next(ctx, db, 1000)
					require.NoError(t, err)
					if len(rows) == 0 {
						return
					}
					for _, r := range rows {
						changes, err := state.Apply(r)
						require.NoError(t, err)
						for _, c := range changes {
							queues.Update(c.Job, micros())
						}
					}
				}
			}
			cursor := func() fairness.Cursor {
				var c fairness.Cursor
				require.NoError(t, db.QueryRow(ctx, `SELECT last_group, counter FROM fairway_fairness WHERE id = 1`).Scan(&c.Group, &c.Counter))
				return c
			}
			groups := []string{"acme", "globex", "hooli", "initech", "umbrella", "wayne"}
			tasks := []string{"t0", "t1", "t2"}
			if weighted {
				require.NoError(t, s.SetWeight(ctx, "acme", 3))
				require.NoError(t, s.SetWeight(ctx, "hooli", 0.5))
			}
			fairnessMode := store.FairnessJobs
			if byTime {
				fairnessMode = store.FairnessTime
			}
			// The book of shares as the journal's fold keeps it: weights
			// set, each claimed job's charge, the run times of the ends.
			// The mirror's rows carry no charges or run times (the row
			// engine's claims and learning write them in its tables), so
			// the test moves the book itself with what the leader's rows
			// would carry, and checks before every claim that it equals
			// the row engine's tables; the claim from memory uses it
			// (nil when a claim uses no shares, as the row engine).
			book := fairness.NewBook()
			if weighted {
				book.SetWeight("acme", 3)
				book.SetWeight("hooli", 0.5)
			}
			// The rate limits' rows are the leader's to append.
			lease, ok, err := journal.Acquire(ctx, db, 0, "test", time.Hour)
			require.NoError(t, err)
			require.True(t, ok)
			if limited {
				// t0 starts at most 4 times an hour: its jobs are soon
				// passed over while the others' are claimed.
				require.NoError(t, s.SetRateLimit(ctx, "t0", "", "4/h"))
				body, err := journal.Encode([]journal.Item{{Task: "t0", Starts: 4, PeriodMS: time.Hour.Milliseconds()}})
				require.NoError(t, err)
				require.NoError(t, journal.AppendFenced(ctx, db, 0, lease.Epoch, journal.Rate, body))
			}
			checkBuckets := func(step int) {
				type bucket struct {
					Key    string
					Tokens float64
				}
				rows, err := db.Query(ctx, `SELECT key, tokens FROM fairway_rate_bucket`)
				require.NoError(t, err)
				buckets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[bucket])
				require.NoError(t, err)
				for _, b := range buckets {
					require.Contains(t, state.Rates.Buckets, b.Key, "step %d: bucket %s is in the row engine's tables only", step, b.Key)
					// The row engine stamps a bucket when its claim reads
					// it, the fold at the claimed row's transaction's start:
					// a few milliseconds of refill apart, at most 21 an hour.
					require.InDelta(t, b.Tokens, state.Rates.Buckets[b.Key].Tokens, 0.001, "step %d: bucket %s's tokens", step, b.Key)
				}
				require.Len(t, state.Rates.Buckets, len(buckets), "step %d: the buckets", step)
			}
			checkBook := func(step int) {
				var vclock float64
				require.NoError(t, db.QueryRow(ctx, `SELECT vclock FROM fairway_fairness WHERE id = 1`).Scan(&vclock))
				require.InDelta(t, vclock, book.Clock, 1e-9, "step %d: the clock", step)
				type share struct {
					Group         string
					Weight, VTime float64
				}
				rows, err := db.Query(ctx, `SELECT group_name, weight, vtime FROM fairway_group_share`)
				require.NoError(t, err)
				shares, err := pgx.CollectRows(rows, pgx.RowToStructByPos[share])
				require.NoError(t, err)
				for _, sh := range shares {
					require.Contains(t, book.VTimes, sh.Group, "step %d: group %s has a virtual time in the row engine's tables only", step, sh.Group)
					require.InDelta(t, sh.VTime, book.VTimes[sh.Group], 1e-6, "step %d: group %s's virtual time", step, sh.Group)
					require.Equal(t, sh.Weight, book.Weight(sh.Group), "step %d: group %s's weight", step, sh.Group)
				}
				require.Len(t, book.VTimes, len(shares), "step %d: the groups with virtual times", step)
				type runTime struct {
					Group, Task string
					MS          float64
				}
				rows, err = db.Query(ctx, `SELECT group_name, task, avg_ms FROM fairway_run_time`)
				require.NoError(t, err)
				runTimes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[runTime])
				require.NoError(t, err)
				for _, r := range runTimes {
					require.InDelta(t, r.MS, book.RunMS[[2]string{r.Group, r.Task}], 1e-6, "step %d: the run time of group %q's task %s", step, r.Group, r.Task)
				}
				require.Len(t, book.RunMS, len(runTimes), "step %d: the run times learned", step)
			}
			scheme := fairway.CountingScheme{High: 3, Low: 1}
			var held []fairway.Job
			claims, rateBlocked := 0, 0
			for step := range 120 {
				switch r := rng.IntN(10); {
				case r < 3:
					var subs []fairway.Submission
					for range 1 + rng.IntN(6) {
						sub := fairway.Submission{Group: groups[rng.IntN(len(groups))], Task: tasks[rng.IntN(len(tasks))], Priority: fairway.PriorityLow}
						if rng.IntN(3) == 0 {
							sub.Priority = fairway.PriorityHigh
						}
						switch rng.IntN(12) {
						case 0:
							sub.RunIn = "1h"
						case 1:
							sub.Pending = true
						}
						require.NoError(t, sub.Normalize("", "", fairway.DefaultMaxArgsSize, 3))
						subs = append(subs, sub)
					}
					_, err := s.InsertJobs(ctx, subs, nil)
					require.NoError(t, err)
				case r < 7:
					p := store.ClaimParams{Executor: "w", Instance: "i", Limit: 1 + rng.IntN(7), Tasks: tasks, Lease: time.Hour, Scheme: scheme, Fairness: fairnessMode}
					if rng.IntN(3) == 0 {
						p.Tasks = []string{tasks[rng.IntN(3)], tasks[rng.IntN(3)]}
						p.Tasks = slices.Compact(slices.Sorted(slices.Values(p.Tasks)))
					}
					if rng.IntN(4) == 0 {
						// Named twice sometimes: one group all the same.
						p.Groups = []string{groups[rng.IntN(6)], groups[rng.IntN(6)], groups[rng.IntN(6)]}
					}
					if rng.IntN(4) == 0 {
						p.TaskLimits = map[string]int{tasks[rng.IntN(3)]: rng.IntN(3)}
					}
					fold()
					// The cluster's limits as operators set them; the jobs
					// held, as the journal's state counts them.
					limits, err := s.Limits(ctx)
					require.NoError(t, err)
					lim := state.Limits(limits, p.TaskLimits)
					cur := cursor()
					checkBook(step)
					checkBuckets(step)
					var sh *fairness.Shares
					if byTime || book.Weighted() {
						sh = fairness.SharesOf(book, byTime)
					}
					predicted := queues.Claim(journal.ClaimParams{Limit: p.Limit, Tasks: p.Tasks, Groups: p.Groups, Scheme: scheme, Limits: lim, Shares: sh}, &cur, micros())
					var refs []fairway.JobRef
					var want []string
					for _, c := range predicted {
						refs = append(refs, fairway.JobRef{Group: c.Group, ID: c.ID})
						want = append(want, c.Group+"/"+c.ID)
					}
					queues.Release(micros(), refs...) // a prediction: the row engine claims them
					jobs, err := s.Claim(ctx, p)
					require.NoError(t, err)
					var got []string
					for _, j := range jobs {
						got = append(got, j.Group+"/"+j.ID)
					}
					slices.Sort(want)
					slices.Sort(got)
					require.Equal(t, want, got, "step %d: claim %+v from cursor %+v", step, p, cursor())
					if len(jobs) > 0 {
						require.Equal(t, cursor(), cur, "step %d: the cursor after the claim", step)
					}
					for _, c := range predicted {
						if c.Charge != 0 {
							book.Charge(c.Group, c.Charge) // as the fold of the leader's claimed row
						}
					}
					held = append(held, jobs...)
					claims += len(jobs)
					if lim != nil && lim.Rates.Blocked() {
						rateBlocked++
					}
				case r < 9:
					var outcomes []store.Outcome
					var endedTasks []string // the outcomes' tasks
					for range min(len(held), 1+rng.IntN(4)) {
						i := rng.IntN(len(held))
						j := held[i]
						held = slices.Delete(held, i, i+1)
						endedTasks = append(endedTasks, j.Task)
						kind := []fairway.Outcome{fairway.OutcomeSuccess, fairway.OutcomeError, fairway.OutcomeReleased}[rng.IntN(3)]
						outcomes = append(outcomes, store.Outcome{Attempt: store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: "i"},
							Kind: kind, Error: "e"})
					}
					_, err := s.Complete(ctx, outcomes, 0)
					require.NoError(t, err)
					if byTime {
						var runs []store.Run
						var ran []fairness.Ran
						for i, o := range outcomes {
							d := time.Duration(1+rng.IntN(5000)) * time.Millisecond
							runs = append(runs, store.Run{Group: o.Group, JobID: o.JobID, Ran: d})
							ran = append(ran, fairness.Ran{Group: o.Group, Task: endedTasks[i], MS: float64(d.Milliseconds())})
						}
						require.NoError(t, s.LearnRunTimes(ctx, runs))
						book.Learn(ran) // as the fold of the leader's ended row
					}
				case limited && rng.IntN(5) == 0:
					// Odd seeds: rate limits come and go, in the row
					// engine's tables and as the leader's rate rows: of a
					// group, of a task in a group, or of each group (a
					// looser one, so that the histories go on claiming), or
					// of a task across the cluster.
					task, group, most := "", groups[rng.IntN(6)], 6
					switch rng.IntN(6) {
					case 3:
						task = tasks[rng.IntN(3)]
					case 4:
						task, group = tasks[rng.IntN(3)], ""
					case 5:
						group, most = fairness.AnyGroup, 20
					}
					it := journal.Item{Task: task, Group: group}
					if rng.IntN(2) == 0 {
						_ = s.DeleteRateLimit(ctx, task, group) // not found is fine
					} else {
						rate := fmt.Sprintf("%d/h", 2+rng.IntN(most))
						require.NoError(t, s.SetRateLimit(ctx, task, group, rate))
						starts, period, err := fairway.ParseRate(rate)
						require.NoError(t, err)
						it.Starts, it.PeriodMS = float64(starts), period.Milliseconds()
					}
					body, err := journal.Encode([]journal.Item{it})
					require.NoError(t, err)
					require.NoError(t, journal.AppendFenced(ctx, db, 0, lease.Epoch, journal.Rate, body))
				case limited && rng.IntN(2) == 0:
					// Odd seeds: concurrency limits come and go.
					kind, name := store.LimitTask, tasks[rng.IntN(3)]
					if rng.IntN(2) == 0 {
						kind, name = store.LimitGroup, append(slices.Clone(groups), store.AnyGroup)[rng.IntN(7)]
					}
					if rng.IntN(3) == 0 {
						_ = s.DeleteLimit(ctx, kind, name) // not found is fine
					} else {
						require.NoError(t, s.SetLimit(ctx, kind, name, rng.IntN(4)))
					}
				default:
					jobs := storetest.Jobs(t, s, groups[rng.IntN(len(groups))])
					for _, j := range jobs {
						if j.State == fairway.StateWaiting {
							_, err := s.Cancel(ctx, j.Group, j.ID)
							require.NoError(t, err)
							break
						}
					}
				}
			}
			require.Greater(t, claims, 50, "the histories claimed too little to test anything")
			if limited {
				require.Positive(t, rateBlocked, "no claim passed a job over for a rate limit")
			}
		})
	}
}

// TestQueuesSayWhichJobsExpired: the jobs whose expiry passed and that no
// executor holds (waiting, stuck or pending), each once however often it
// was indexed, soonest first and a limit at a time; not one that expires
// later, nor one held (until it is given back), nor one that ended.
func TestQueuesSayWhichJobsExpired(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "g", ID: "soon", Task: "t", ExpiresAt: 100},
		journal.Item{Group: "g", ID: "sooner", Task: "t", ExpiresAt: 50, Pending: true},
		journal.Item{Group: "g", ID: "later", Task: "t", ExpiresAt: 1_000},
		journal.Item{Group: "g", ID: "held", Task: "t", ExpiresAt: 10},
		journal.Item{Group: "g", ID: "ended", Task: "t", ExpiresAt: 10},
		journal.Item{Group: "g", ID: "never", Task: "t"}))
	apply(t, s, row(t, 2, journal.Claimed, journal.Item{Group: "g", ID: "held", Attempt: 1, Executor: "e", Instance: "i"}))
	apply(t, s, row(t, 3, journal.Cancel, journal.Item{Group: "g", ID: "ended"}))
	q := journal.NewQueues(s, 0)
	q.Update(fairway.JobRef{Group: "g", ID: "soon"}, 0) // indexed twice
	ref := func(id string) fairway.JobRef { return fairway.JobRef{Group: "g", ID: id} }
	require.Equal(t, []fairway.JobRef{ref("sooner")}, q.Expired(500, 1))
	require.Equal(t, []fairway.JobRef{ref("soon")}, q.Expired(500, 10))
	require.Empty(t, q.Expired(500, 10))
	// The held job is given back: it expires now.
	apply(t, s, row(t, 4, journal.Released, journal.Item{Group: "g", ID: "held", Attempt: 1, Executor: "e", Instance: "i"}))
	q.Update(ref("held"), 500)
	require.Equal(t, []fairway.JobRef{ref("held")}, q.Expired(500, 10))
	require.Equal(t, []fairway.JobRef{ref("later")}, q.Expired(1_000, 10))
}

// TestQueuesSayWhichPendingJobsReleaseThemselves: a pending job with a
// trigger is due at its time, once; one without, one waiting for a
// dependency, or one released before, is not; the earliest trigger is
// among the next due times.
func TestQueuesSayWhichPendingJobsReleaseThemselves(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "g", ID: "soon", Task: "t", Pending: true, Trigger: true, RunAt: 100},
		journal.Item{Group: "g", ID: "later", Task: "t", Pending: true, Trigger: true, RunAt: 1_000},
		journal.Item{Group: "g", ID: "by-hand", Task: "t", Pending: true},
		journal.Item{Group: "g", ID: "released", Task: "t", Pending: true, Trigger: true, RunAt: 50},
		journal.Item{Group: "g", ID: "dep", Task: "t"},
		journal.Item{Group: "g", ID: "waits", Task: "t", Pending: true, Trigger: true, RunAt: 10, Waits: []string{"dep"}}))
	apply(t, s, row(t, 2, journal.Release, journal.Item{Group: "g", ID: "released"}))
	q := journal.NewQueues(s, 0)
	at, ok := q.NextDue()
	require.True(t, ok)
	require.Equal(t, int64(100), at, "the earliest trigger")
	require.False(t, q.TriggerDue(99))
	require.True(t, q.TriggerDue(500))
	ref := func(id string) fairway.JobRef { return fairway.JobRef{Group: "g", ID: id} }
	require.Equal(t, []fairway.JobRef{ref("soon")}, q.Triggered(500, 10))
	require.Empty(t, q.Triggered(500, 10))
	require.Equal(t, []fairway.JobRef{ref("later")}, q.Triggered(1_000, 10))
}
