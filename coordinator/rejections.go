package coordinator

import (
	"cmp"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// A wait for a submission that was rejected before the wait came (a
// client that publishes and then waits, while the ingest is quicker than
// its request) would hear no rejection, and end not found. So every
// coordinator hears every rejected event from its start (whichever
// coordinator rejected it): it answers the waits held for those jobs, and
// remembers the recent ones: a wait that finds no job looks there first,
// and again when it runs out.

// Bounds of the rejections remembered: the newest rejectionsKept, none
// older than rejectionsAge (a flood of rejections costs a few MiB at
// most: an entry keeps the ids, the code, the field and the message).
const (
	rejectionsKept = 10_000
	rejectionsAge  = 5 * time.Minute
)

// rejections are the recent rejected events, by group and job id.
type rejections struct {
	mu    sync.Mutex
	byKey map[fairway.JobRef]rejected
	order []fairway.JobRef // oldest first, a ring of rejectionsKept
	head  int
}

type rejected struct {
	err  *fairway.Error
	at   time.Time
	slot int // its place in order
}

func newRejections() *rejections {
	return &rejections{byKey: map[fairway.JobRef]rejected{}}
}

// record remembers the rejections among evs.
func (r *rejections) record(evs []events.Event) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		if ev.State != fairway.StateRejected || ev.JobID == "" {
			continue
		}
		key := fairway.JobRef{Group: ev.Group, ID: ev.JobID}
		slot := len(r.order)
		if slot < rejectionsKept {
			r.order = append(r.order, key)
		} else {
			// The oldest place goes, and its key with it unless a later
			// place holds it (the same id rejected again).
			slot = r.head
			if old := r.order[slot]; r.byKey[old].slot == slot {
				delete(r.byKey, old)
			}
			r.order[slot] = key
			r.head = (r.head + 1) % rejectionsKept
		}
		r.byKey[key] = rejected{at: now, slot: slot, err: &fairway.Error{Code: cmp.Or(ev.Code, fairway.CodeInvalid), Field: ev.Field, JobID: ev.JobID, Message: ev.Error}}
	}
}

// of returns the recent rejection of the job, or nil.
func (r *rejections) of(group, id string) *fairway.Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rej, ok := r.byKey[fairway.JobRef{Group: group, ID: id}]
	if !ok || time.Since(rej.at) > rejectionsAge {
		return nil
	}
	return rej.err
}
