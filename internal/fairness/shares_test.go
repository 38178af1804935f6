package fairness_test

import (
	"container/heap"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/stretchr/testify/require"
)

// simGroup is one backlogged group of the simulator: its jobs all run
// for run, and it has weight.
type simGroup struct {
	name   string
	run    time.Duration
	weight float64
}

type simSlot struct {
	free  time.Duration
	group string
	task  string
	ran   time.Duration
	ex    int // the executor it is of (spreadSim)
}

type slotHeap []simSlot

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i].free < h[j].free }
func (h slotHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)        { *h = append(*h, x.(simSlot)) }
func (h *slotHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate runs backlogged groups (sorted by name) on slots for d: each slot that frees
// asks a claim for one job (as executors do), the claim picks with
// PickShares (or Pick, counting jobs without weights, for shares nil),
// and a job that ends is learned as the store learns it (its run time
// averaged per group and task, its charge corrected): the book of shares
// moves as the journal's fold moves it, by the claims' charges and the
// ends' run times. It returns each
// group's share of the slot-time used.
func simulate(groups []simGroup, slots int, d time.Duration, mode string) map[string]float64 {
	book := fairness.NewBook()
	for _, g := range groups {
		book.SetWeight(g.name, g.weight)
	}
	st := &fairness.Cursor{}
	used := map[string]time.Duration{}
	var total time.Duration
	h := &slotHeap{}
	for range slots {
		heap.Push(h, simSlot{})
	}
	seq := 0
	for {
		s := heap.Pop(h).(simSlot)
		if s.free >= d {
			break
		}
		if s.group != "" {
			book.Learn([]fairness.Ran{{Group: s.group, Task: s.task, MS: float64(s.ran.Milliseconds())}})
		}
		// Every group is backlogged: candidates in name order after the
		// cursor, as the walk returns them.
		var queues []*fairness.Queue
		for _, g := range groups {
			seq++
			queues = append(queues, &fairness.Queue{Name: g.name, Low: []fairness.Candidate{{ID: fmt.Sprint(seq), Group: g.name, Task: "t", Priority: fairway.PriorityLow}}, LowMore: true})
		}
		queues = rotate(queues, st.Group)
		picked, _ := fairness.PickShares(queues, 1, fairway.CountingScheme{High: 4, Low: 1}, st, nil, fairness.SharesOf(book, mode == fairness.ByTime))
		c := picked[0]
		book.Charge(c.Group, c.Charge) // as the journal's fold does for a claimed row
		var run time.Duration
		for _, g := range groups {
			if g.name == c.Group {
				run = g.run
			}
		}
		end := min(s.free+run, d)
		used[c.Group] += end - s.free
		total += end - s.free
		heap.Push(h, simSlot{free: s.free + run, group: c.Group, task: c.Task, ran: run})
	}
	shares := map[string]float64{}
	for g, u := range used {
		shares[g] = float64(u) / float64(total)
	}
	return shares
}

// rotate orders queues (sorted by name) as the walk does: the groups
// after cursor, then the others.
func rotate(queues []*fairness.Queue, cursor string) []*fairness.Queue {
	k := 0
	for k < len(queues) && queues[k].Name <= cursor {
		k++
	}
	return append(append([]*fairness.Queue{}, queues[k:]...), queues[:k]...)
}

// TestSharesOfSlotTime: the scheduling rule without a database, against
// the arithmetic of weighted fair queueing. Two groups backlogged on 10
// slots, jobs of 100 ms and 10 ms: counting jobs gives them equal starts,
// so about 91% and 9% of the slot-time; sharing time gives half each, and
// weights 3 and 1 give 75% and 25%.
func TestSharesOfSlotTime(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		groups []simGroup
		want   map[string]float64
	}{
		{"jobs, equal weights", fairness.ByJobs, []simGroup{{"a", 100 * time.Millisecond, 1}, {"b", 10 * time.Millisecond, 1}},
			map[string]float64{"a": 100.0 / 110, "b": 10.0 / 110}},
		{"time, equal weights", fairness.ByTime, []simGroup{{"a", 100 * time.Millisecond, 1}, {"b", 10 * time.Millisecond, 1}},
			map[string]float64{"a": 0.5, "b": 0.5}},
		{"time, weights 3 and 1", fairness.ByTime, []simGroup{{"a", 100 * time.Millisecond, 3}, {"b", 10 * time.Millisecond, 1}},
			map[string]float64{"a": 0.75, "b": 0.25}},
		{"time, 10 minutes against 1 second", fairness.ByTime, []simGroup{{"a", 10 * time.Minute, 1}, {"b", time.Second, 1}},
			map[string]float64{"a": 0.5, "b": 0.5}},
		{"jobs, weights 3 and 1, equal jobs", fairness.ByJobs, []simGroup{{"a", 10 * time.Millisecond, 3}, {"b", 10 * time.Millisecond, 1}},
			map[string]float64{"a": 0.75, "b": 0.25}},
		{"time, three groups, weights 2, 1, 1", fairness.ByTime, []simGroup{{"a", 50 * time.Millisecond, 2}, {"b", 5 * time.Millisecond, 1}, {"c", 200 * time.Millisecond, 1}},
			map[string]float64{"a": 0.5, "b": 0.25, "c": 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := 600 * time.Second
			if tc.groups[0].run >= time.Minute {
				d = 48 * time.Hour
			}
			got := simulate(tc.groups, 10, d, tc.mode)
			for g, want := range tc.want {
				require.InDelta(t, want, got[g], 0.02, "group %s: %v", g, got)
			}
		})
	}
}
