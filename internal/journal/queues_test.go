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
			// The shares as the row engine keeps them, for the claim from
			// memory to start from (nil when a claim uses none).
			shares := func() *fairness.Shares {
				var vclock float64
				var anyWeight bool
				require.NoError(t, db.QueryRow(ctx, `SELECT vclock, EXISTS (SELECT 1 FROM fairway_group_share WHERE weight <> 1) FROM fairway_fairness WHERE id = 1`).Scan(&vclock, &anyWeight))
				if !byTime && !anyWeight {
					return nil
				}
				sh := fairness.NewShares(byTime, vclock)
				rows, err := db.Query(ctx, `SELECT group_name, weight, vtime FROM fairway_group_share`)
				require.NoError(t, err)
				for rows.Next() {
					var g string
					var w, v float64
					require.NoError(t, rows.Scan(&g, &w, &v))
					sh.SetWeight(g, w)
					sh.SetVTime(g, v)
				}
				require.NoError(t, rows.Err())
				rows, err = db.Query(ctx, `SELECT group_name, task, avg_ms FROM fairway_run_time`)
				require.NoError(t, err)
				for rows.Next() {
					var g, task string
					var ms float64
					require.NoError(t, rows.Scan(&g, &task, &ms))
					sh.SetCost(g, task, ms)
				}
				require.NoError(t, rows.Err())
				return sh
			}
			scheme := fairway.CountingScheme{High: 3, Low: 1}
			var held []fairway.Job
			claims := 0
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
					sh := shares()
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
						if sh != nil {
							var vclock float64
							require.NoError(t, db.QueryRow(ctx, `SELECT vclock FROM fairway_fairness WHERE id = 1`).Scan(&vclock))
							require.InDelta(t, vclock, sh.Clock(), 1e-9, "step %d: the shares' clock after the claim", step)
						}
					}
					held = append(held, jobs...)
					claims += len(jobs)
				case r < 9:
					var outcomes []store.Outcome
					for range min(len(held), 1+rng.IntN(4)) {
						i := rng.IntN(len(held))
						j := held[i]
						held = slices.Delete(held, i, i+1)
						kind := []fairway.Outcome{fairway.OutcomeSuccess, fairway.OutcomeError, fairway.OutcomeReleased}[rng.IntN(3)]
						outcomes = append(outcomes, store.Outcome{Attempt: store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: "i"},
							Kind: kind, Error: "e"})
					}
					_, err := s.Complete(ctx, outcomes, 0)
					require.NoError(t, err)
					if byTime {
						var runs []store.Run
						for _, o := range outcomes {
							runs = append(runs, store.Run{Group: o.Group, JobID: o.JobID, Ran: time.Duration(1+rng.IntN(5000)) * time.Millisecond})
						}
						require.NoError(t, s.LearnRunTimes(ctx, runs))
					}
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
		})
	}
}
