package journal_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The fair claim's rules, each on its own, through a leader: round-robin
// across the groups with eligible work from the cursor, oldest first in a
// group, the counting scheme of priorities and its fallback, due stuck
// jobs first, the tasks an executor runs and the groups its credential
// grants. (The random histories of TestTheLeadersStateIsTheFoldOfPostgreSQL
// hold the fold; these hold what a claim picks.)

// rulesLeader is a leader of a fresh partition, and a counter of the jobs
// submitted to it.
type rulesLeader struct {
	t  *testing.T
	db *pgxpool.Pool
	l  *journal.Leader
	n  int
}

func newRulesLeader(t *testing.T) *rulesLeader {
	db := pool(t)
	return &rulesLeader{t: t, db: db, l: leading(t, db, "c1")}
}

// submit appends one submitted row of a job per group in groups, of task
// t and priority prio, and waits until the leader has folded it.
func (r *rulesLeader) submit(prio string, groups ...string) []string {
	r.t.Helper()
	var items []journal.Item
	var ids []string
	for _, g := range groups {
		r.n++
		id := fmt.Sprintf("j%03d", r.n)
		items = append(items, journal.Item{Group: g, ID: id, Task: "t", Priority: prio, MaxRetries: 3})
		ids = append(ids, id)
	}
	body, err := journal.Encode(items)
	require.NoError(r.t, err)
	require.NoError(r.t, journal.Append(r.t.Context(), r.db, 0, journal.Submitted, body))
	r.l.Wake()
	last := fairway.JobRef{Group: items[len(items)-1].Group, ID: items[len(items)-1].ID}
	require.Eventually(r.t, func() bool {
		var in bool
		r.l.View(func(s *journal.State, _ journal.Lease) { in = s.Jobs.Get(last) != nil })
		return in
	}, 10*time.Second, 2*time.Millisecond, "the leader folds %v", last)
	return ids
}

// claim claims up to limit jobs under the counting scheme 4,1.
func (r *rulesLeader) claim(limit int, edit ...func(*journal.ClaimParams)) []journal.ClaimedJob {
	r.t.Helper()
	p := journal.ClaimParams{Executor: "w", Instance: "i", Limit: limit, Tasks: []string{"t"}, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
	for _, e := range edit {
		e(&p)
	}
	jobs, err := r.l.Claim(r.t.Context(), p)
	require.NoError(r.t, err)
	return jobs
}

// claimOneByOne claims n jobs, one claim each.
func (r *rulesLeader) claimOneByOne(n int) []journal.ClaimedJob {
	var all []journal.ClaimedJob
	for range n {
		all = append(all, r.claim(1)...)
	}
	return all
}

func groupsOf(jobs []journal.ClaimedJob) []string {
	var gs []string
	for _, j := range jobs {
		gs = append(gs, j.Ref.Group)
	}
	return gs
}

func priosOf(jobs []journal.ClaimedJob) string {
	var b []byte
	for _, j := range jobs {
		b = append(b, map[string]byte{"high": 'H', "low": 'L'}[j.Priority])
	}
	return string(b)
}

// TestClaimsGoRoundRobinOverGroups: group a submits first, but a claim
// takes a, b, c in turn, oldest first within a group, whether the jobs
// are claimed in one claim or one at a time.
func TestClaimsGoRoundRobinOverGroups(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			r := newRulesLeader(t)
			for _, g := range []string{"a", "a", "a", "a", "b", "b", "c", "c", "c"} {
				r.submit("low", g)
			}
			var jobs []journal.ClaimedJob
			if batch {
				jobs = r.claim(100)
			} else {
				jobs = r.claimOneByOne(10)
			}
			require.Equal(t, []string{"a", "b", "c", "a", "b", "c", "a", "c", "a"}, groupsOf(jobs))
			var aIDs []string
			for _, j := range jobs {
				if j.Ref.Group == "a" {
					aIDs = append(aIDs, j.Ref.ID)
				}
			}
			require.Equal(t, []string{"j001", "j002", "j003", "j004"}, aIDs, "oldest first within a group")
		})
	}
}

// TestTheRoundRobinGoesOnAcrossClaims: the cursor stays where the last
// claim left it; a new group that sorts before the cursor waits for the
// wrap-around.
func TestTheRoundRobinGoesOnAcrossClaims(t *testing.T) {
	r := newRulesLeader(t)
	for range 3 {
		r.submit("low", "a", "b", "c")
	}
	require.Equal(t, []string{"a", "b"}, groupsOf(r.claim(2)))
	require.Equal(t, []string{"c", "a"}, groupsOf(r.claim(2)))
	r.submit("low", "0")
	require.Equal(t, []string{"b", "c", "0", "a", "b", "c"}, groupsOf(r.claim(10)))
}

// TestClaimsFollowTheCountingScheme: 4,1 takes four high, one low, and
// starts over; when high runs out, low is taken instead.
func TestClaimsFollowTheCountingScheme(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			r := newRulesLeader(t)
			for range 10 {
				r.submit("low", "a")
			}
			for range 10 {
				r.submit("high", "a")
			}
			var jobs []journal.ClaimedJob
			if batch {
				jobs = r.claim(20)
			} else {
				jobs = r.claimOneByOne(20)
			}
			require.Equal(t, "HHHHLHHHHLHHLLLLLLLL", priosOf(jobs))
		})
	}
}

// TestTheCountingSchemeFallsBackToTheOtherPriority: a step of the scheme
// that finds none of its priority takes the other, and the scheme moves
// on all the same.
func TestTheCountingSchemeFallsBackToTheOtherPriority(t *testing.T) {
	r := newRulesLeader(t)
	for range 3 {
		r.submit("low", "a")
	}
	require.Equal(t, "LLL", priosOf(r.claimOneByOne(3)))
	// The scheme moved on by three steps even so: the next asks are
	// H, L, H, H, H, H; with three of each, the last two fall back to low.
	for range 3 {
		r.submit("high", "a")
		r.submit("low", "a")
	}
	require.Equal(t, "HLHHLL", priosOf(r.claim(6)))
}

// TestDueStuckJobsAreClaimedFirst: a job whose attempt failed, due again,
// comes before newer waiting jobs of its group, even of high priority,
// with its next attempt.
func TestDueStuckJobsAreClaimedFirst(t *testing.T) {
	r := newRulesLeader(t)
	first := r.submit("low", "a")[0]
	j := r.claim(1)[0]
	require.Equal(t, first, j.Ref.ID)
	_, err := r.l.Report(t.Context(), []journal.Report{{Kind: journal.Ended, Item: journal.Item{Group: "a", ID: first, Attempt: j.Attempt,
		Executor: "w", Instance: "i", Outcome: journal.OutcomeError, Error: "boom", RunAt: 1}}})
	require.NoError(t, err)
	require.True(t, r.l.View(func(s *journal.State, _ journal.Lease) {
		require.Equal(t, fairway.StateStuck, s.Jobs.Get(fairway.JobRef{Group: "a", ID: first}).State())
	}))
	r.submit("high", "a", "a")
	jobs := r.claim(3)
	require.Len(t, jobs, 3)
	require.Equal(t, first, jobs[0].Ref.ID)
	require.EqualValues(t, 2, jobs[0].Attempt)
}

// TestClaimsTakeOnlyTheTasksAndGroupsGranted: an executor gets only the
// jobs of the tasks it runs, and of the groups its credential grants (in
// round-robin order among them; granted none, none).
func TestClaimsTakeOnlyTheTasksAndGroupsGranted(t *testing.T) {
	r := newRulesLeader(t)
	for range 3 {
		r.submit("low", "a", "b", "c", "d")
	}
	require.Empty(t, r.claim(5, func(p *journal.ClaimParams) { p.Tasks = []string{"other"} }), "a task nobody submitted")
	granted := func(groups ...string) func(*journal.ClaimParams) {
		return func(p *journal.ClaimParams) { p.Groups = append([]string{}, groups...) } // never nil: nil grants every group
	}
	require.Equal(t, []string{"b", "d", "b", "d"}, groupsOf(r.claim(4, granted("d", "b"))))
	require.Empty(t, r.claim(4, granted()), "granted no group")
	require.Equal(t, []string{"a", "b", "c", "d", "a", "c", "a", "c"}, groupsOf(r.claim(10)), "the others' jobs, for an executor granted every group")
}
