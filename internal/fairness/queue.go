package fairness

import "github.com/fairwayhq/fairway"

// Queue holds one group's locked candidates, best first, and whether
// each list may have more rows than were fetched.
type Queue struct {
	// Name is the group's.
	Name string
	// Stuck, High and Low are the group's due stuck jobs and its waiting
	// jobs of high and of low priority, best first.
	Stuck, High, Low []Candidate
	// StuckMore, HighMore and LowMore say that the list may have more rows
	// than were fetched.
	StuckMore, HighMore, LowMore bool
}

// Take removes the group's next job for the priority hint that allowed
// accepts (jobs it refuses are dropped from the lists: this claim cannot
// take them). unknown is true when the answer depends on rows that were
// not fetched.
func (q *Queue) Take(hint fairway.Priority, allowed func(Candidate) bool) (c Candidate, ok, unknown bool) {
	first, second := &q.High, &q.Low
	firstMore, secondMore := q.HighMore, q.LowMore
	if hint == fairway.PriorityLow {
		first, second = second, first
		firstMore, secondMore = secondMore, firstMore
	}
	for _, l := range []struct {
		list *[]Candidate
		more bool
	}{{&q.Stuck, q.StuckMore}, {first, firstMore}, {second, secondMore}} {
		for len(*l.list) > 0 {
			c = (*l.list)[0]
			*l.list = (*l.list)[1:]
			if allowed(c) {
				return c, true, false
			}
		}
		if l.more {
			return c, false, true
		}
	}
	return c, false, false
}
