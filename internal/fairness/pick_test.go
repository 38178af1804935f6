package fairness_test

import (
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/stretchr/testify/require"
)

// queue builds a group's candidates from ids: "s…" stuck, "h…" high, "l…"
// low waiting jobs; a trailing "+" on a kind says more rows of it exist
// than were fetched.
func queue(group string, ids ...string) *fairness.Queue {
	q := &fairness.Queue{Name: group}
	for _, id := range ids {
		more := strings.HasSuffix(id, "+")
		id = strings.TrimSuffix(id, "+")
		c := fairness.Candidate{ID: group + "-" + id, Group: group, State: fairway.StateWaiting}
		switch id[0] {
		case 's':
			c.State = fairway.StateStuck
			if id != "s" {
				q.Stuck = append(q.Stuck, c)
			}
			q.StuckMore = q.StuckMore || more
		case 'h':
			c.Priority = fairway.PriorityHigh
			if id != "h" {
				q.High = append(q.High, c)
			}
			q.HighMore = q.HighMore || more
		default:
			c.Priority = fairway.PriorityLow
			if id != "l" {
				q.Low = append(q.Low, c)
			}
			q.LowMore = q.LowMore || more
		}
	}
	return q
}

func ids(cs []fairness.Candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.ID)
	}
	return strings.Join(s, " ")
}

// TestPick: the selection rules without a database.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name    string
		queues  []*fairness.Queue
		limit   int
		walkCut bool
		scheme  fairway.CountingScheme
		counter int64
		want    string
		more    bool
		cursor  string
	}{
		{name: "round-robin, one job per group per turn",
			queues: []*fairness.Queue{queue("a", "h1", "h2"), queue("b", "h1", "h2"), queue("c", "h1")}, limit: 5,
			want: "a-h1 b-h1 c-h1 a-h2 b-h2", cursor: "b"},
		{name: "a group that runs out passes its turn on",
			queues: []*fairness.Queue{queue("a", "l1"), queue("b", "l1", "l2", "l3")}, limit: 4,
			want: "a-l1 b-l1 b-l2 b-l3", cursor: "b"},
		{name: "due stuck jobs come first in their group",
			queues: []*fairness.Queue{queue("a", "h1", "s1"), queue("b", "h1")}, limit: 3,
			want: "a-s1 b-h1 a-h1", cursor: "a"},
		{name: "counting scheme 1,1 alternates high and low",
			queues: []*fairness.Queue{queue("a", "h1", "h2", "l1", "l2")}, limit: 4, scheme: fairway.CountingScheme{High: 1, Low: 1},
			want: "a-h1 a-l1 a-h2 a-l2", cursor: "a"},
		{name: "the scheme's position carries over (counter 4 of 4,1 asks low)",
			queues: []*fairness.Queue{queue("a", "h1", "l1")}, limit: 1, counter: 4,
			want: "a-l1", cursor: "a"},
		{name: "the other priority when the asked one has none",
			queues: []*fairness.Queue{queue("a", "l1", "l2")}, limit: 2,
			want: "a-l1 a-l2", cursor: "a"},
		{name: "a list cut off: the next job is unknown, stop for another round",
			queues: []*fairness.Queue{queue("a", "h1+"), queue("b", "h1", "h2")}, limit: 4,
			want: "a-h1 b-h1", more: true, cursor: "b"},
		{name: "a cut list of the other priority is unknown too",
			queues: []*fairness.Queue{queue("a", "h", "l+"), queue("b", "h1")}, limit: 2,
			want: "", more: true},
		{name: "groups after the last walked one are unknown (walk cut)",
			queues: []*fairness.Queue{queue("a", "h1", "h2"), queue("b", "h1", "h2")}, limit: 2, walkCut: true,
			want: "a-h1 b-h1", cursor: "b"},
		{name: "walk cut with jobs left after a full turn",
			queues: []*fairness.Queue{queue("a", "h1", "h2"), queue("b")}, limit: 2, walkCut: true,
			want: "a-h1", more: true, cursor: "a"},
		{name: "no groups", limit: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := tc.scheme
			if scheme == (fairway.CountingScheme{}) {
				scheme = fairway.CountingScheme{High: 4, Low: 1}
			}
			st := fairness.Cursor{Counter: tc.counter}
			picked, more := fairness.Pick(tc.queues, tc.limit, tc.walkCut, scheme, &st, nil)
			require.Equal(t, tc.want, ids(picked))
			require.Equal(t, tc.more, more)
			require.Equal(t, tc.cursor, st.Group)
			require.Equal(t, tc.counter+int64(len(picked)), st.Counter, "the scheme moves one step per job")
		})
	}
}

// TestPickSecondRound: a claim whose first round stopped on a cut list
// fetches again and goes on from the same state: the two rounds together
// take what one round over all the rows would have.
func TestPickSecondRound(t *testing.T) {
	scheme := fairway.CountingScheme{High: 1, Low: 1}
	all := func() []*fairness.Queue {
		return []*fairness.Queue{queue("a", "h1", "h2", "l1"), queue("b", "h1", "l1", "l2")}
	}
	var whole fairness.Cursor
	want, more := fairness.Pick(all(), 6, false, scheme, &whole, nil)
	require.False(t, more)
	require.Equal(t, "a-h1 b-l1 a-h2 b-l2 a-l1 b-h1", ids(want))

	// Round 1 fetched one row of a's high jobs and of b's low ones, and
	// stops when a's next high job is unknown.
	var st fairness.Cursor
	first, more := fairness.Pick([]*fairness.Queue{queue("a", "h1", "h+", "l1"), queue("b", "h1", "l1", "l+")}, 6, false, scheme, &st, nil)
	require.True(t, more)
	require.Equal(t, "a-h1 b-l1", ids(first))
	require.Equal(t, fairness.Cursor{Group: "b", Counter: 2}, st)
	// Round 2: the rows the marking left, walked from the group after the
	// cursor.
	second, more := fairness.Pick([]*fairness.Queue{queue("a", "h2", "l1"), queue("b", "h1", "l2")}, 6-len(first), false, scheme, &st, nil)
	require.False(t, more)
	require.Equal(t, ids(want), ids(first)+" "+ids(second))
	require.Equal(t, whole, st)
}

func TestSplit(t *testing.T) {
	require.Equal(t, []int32{2, 2, 1}, fairness.Split(5, 3))
	require.Equal(t, []int32{1, 1, 0, 0}, fairness.Split(2, 4))
}
