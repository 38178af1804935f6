package store

import (
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// queue builds a group's candidates from ids: "s…" stuck, "h…" high, "l…"
// low waiting jobs; a trailing "+" on a kind says more rows of it exist
// than were fetched.
func queue(group string, ids ...string) *groupQueue {
	q := &groupQueue{name: group}
	for _, id := range ids {
		more := strings.HasSuffix(id, "+")
		id = strings.TrimSuffix(id, "+")
		c := candidate{id: group + "-" + id, group: group, state: fairway.StateWaiting}
		switch id[0] {
		case 's':
			c.state = fairway.StateStuck
			if id != "s" {
				q.stuck = append(q.stuck, c)
			}
			q.stuckMore = q.stuckMore || more
		case 'h':
			c.priority = fairway.PriorityHigh
			if id != "h" {
				q.high = append(q.high, c)
			}
			q.highMore = q.highMore || more
		default:
			c.priority = fairway.PriorityLow
			if id != "l" {
				q.low = append(q.low, c)
			}
			q.lowMore = q.lowMore || more
		}
	}
	return q
}

func ids(cs []candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.id)
	}
	return strings.Join(s, " ")
}

// TestPick: the selection rules without a database.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name    string
		queues  []*groupQueue
		limit   int
		walkCut bool
		scheme  fairway.CountingScheme
		counter int64
		want    string
		more    bool
		cursor  string
	}{
		{name: "round-robin, one job per group per turn",
			queues: []*groupQueue{queue("a", "h1", "h2"), queue("b", "h1", "h2"), queue("c", "h1")}, limit: 5,
			want: "a-h1 b-h1 c-h1 a-h2 b-h2", cursor: "b"},
		{name: "a group that runs out passes its turn on",
			queues: []*groupQueue{queue("a", "l1"), queue("b", "l1", "l2", "l3")}, limit: 4,
			want: "a-l1 b-l1 b-l2 b-l3", cursor: "b"},
		{name: "due stuck jobs come first in their group",
			queues: []*groupQueue{queue("a", "h1", "s1"), queue("b", "h1")}, limit: 3,
			want: "a-s1 b-h1 a-h1", cursor: "a"},
		{name: "counting scheme 1,1 alternates high and low",
			queues: []*groupQueue{queue("a", "h1", "h2", "l1", "l2")}, limit: 4, scheme: fairway.CountingScheme{High: 1, Low: 1},
			want: "a-h1 a-l1 a-h2 a-l2", cursor: "a"},
		{name: "the scheme's position carries over (counter 4 of 4,1 asks low)",
			queues: []*groupQueue{queue("a", "h1", "l1")}, limit: 1, counter: 4,
			want: "a-l1", cursor: "a"},
		{name: "the other priority when the asked one has none",
			queues: []*groupQueue{queue("a", "l1", "l2")}, limit: 2,
			want: "a-l1 a-l2", cursor: "a"},
		{name: "a list cut off: the next job is unknown, stop for another round",
			queues: []*groupQueue{queue("a", "h1+"), queue("b", "h1", "h2")}, limit: 4,
			want: "a-h1 b-h1", more: true, cursor: "b"},
		{name: "a cut list of the other priority is unknown too",
			queues: []*groupQueue{queue("a", "h", "l+"), queue("b", "h1")}, limit: 2,
			want: "", more: true},
		{name: "groups after the last walked one are unknown (walk cut)",
			queues: []*groupQueue{queue("a", "h1", "h2"), queue("b", "h1", "h2")}, limit: 2, walkCut: true,
			want: "a-h1 b-h1", cursor: "b"},
		{name: "walk cut with jobs left after a full turn",
			queues: []*groupQueue{queue("a", "h1", "h2"), queue("b")}, limit: 2, walkCut: true,
			want: "a-h1", more: true, cursor: "a"},
		{name: "no groups", limit: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := tc.scheme
			if scheme == (fairway.CountingScheme{}) {
				scheme = fairway.CountingScheme{High: 4, Low: 1}
			}
			st := fairness{counter: tc.counter}
			picked, more := pick(tc.queues, tc.limit, tc.walkCut, scheme, &st, nil)
			require.Equal(t, tc.want, ids(picked))
			require.Equal(t, tc.more, more)
			require.Equal(t, tc.cursor, st.cursor)
			require.Equal(t, tc.counter+int64(len(picked)), st.counter, "the scheme moves one step per job")
		})
	}
}

// TestPickSecondRound: a claim whose first round stopped on a cut list
// fetches again and goes on from the same state: the two rounds together
// take what one round over all the rows would have.
func TestPickSecondRound(t *testing.T) {
	scheme := fairway.CountingScheme{High: 1, Low: 1}
	all := func() []*groupQueue {
		return []*groupQueue{queue("a", "h1", "h2", "l1"), queue("b", "h1", "l1", "l2")}
	}
	var whole fairness
	want, more := pick(all(), 6, false, scheme, &whole, nil)
	require.False(t, more)
	require.Equal(t, "a-h1 b-l1 a-h2 b-l2 a-l1 b-h1", ids(want))

	// Round 1 fetched one row of a's high jobs and of b's low ones, and
	// stops when a's next high job is unknown.
	var st fairness
	first, more := pick([]*groupQueue{queue("a", "h1", "h+", "l1"), queue("b", "h1", "l1", "l+")}, 6, false, scheme, &st, nil)
	require.True(t, more)
	require.Equal(t, "a-h1 b-l1", ids(first))
	require.Equal(t, fairness{cursor: "b", counter: 2}, st)
	// Round 2: the rows the marking left, walked from the group after the
	// cursor.
	second, more := pick([]*groupQueue{queue("a", "h2", "l1"), queue("b", "h1", "l2")}, 6-len(first), false, scheme, &st, nil)
	require.False(t, more)
	require.Equal(t, ids(want), ids(first)+" "+ids(second))
	require.Equal(t, whole, st)
}

func TestShares(t *testing.T) {
	require.Equal(t, []int32{2, 2, 1}, shares(5, 3))
	require.Equal(t, []int32{1, 1, 0, 0}, shares(2, 4))
}
