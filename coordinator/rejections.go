package coordinator

import (
	"cmp"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// A wait for a submission that was rejected before the wait came (a
// client that publishes and then waits, while the ingest is quicker than
// its request) would hear no rejection, and end not found. So every
// coordinator hears every rejected event (whichever coordinator rejected
// it) and remembers the recent ones: a wait that finds no job looks there
// first, and again when it runs out.

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
	err *fairway.Error
	at  time.Time
}

func newRejections() *rejections {
	return &rejections{byKey: map[fairway.JobRef]rejected{}}
}

// heard records the rejections a message of events carries.
func (r *rejections) heard(msg *nats.Msg) {
	evs, err := events.DecodeEvents(msg.Data)
	if err != nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		if ev.State != fairway.StateRejected || ev.JobID == "" {
			continue
		}
		key := fairway.JobRef{Group: ev.Group, ID: ev.JobID}
		if len(r.order) < rejectionsKept {
			r.order = append(r.order, key)
		} else {
			delete(r.byKey, r.order[r.head])
			r.order[r.head] = key
			r.head = (r.head + 1) % rejectionsKept
		}
		r.byKey[key] = rejected{at: now, err: &fairway.Error{Code: cmp.Or(ev.Code, fairway.CodeInvalid), Field: ev.Field, JobID: ev.JobID, Message: ev.Error}}
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
