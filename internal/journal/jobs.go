package journal

import (
	"iter"

	"github.com/fairwayhq/fairway"
)

// Jobs are a State's unfinished jobs, by group, then by id. A leader holds
// one for every waiting job, and a map per group costs it about 35 bytes a
// job where one map keyed by both names cost 60 to 100 (Go's maps by the
// size of their entries; condition 6 of issue 31). A group's map goes
// when its last job does, so that two states of the same jobs are equal.
type Jobs struct {
	groups map[string]map[string]*Job
	n      int
}

// NewJobs is an empty set of jobs.
func NewJobs() *Jobs { return &Jobs{groups: map[string]map[string]*Job{}} }

// Get is the job of ref (nil: none).
func (js *Jobs) Get(ref fairway.JobRef) *Job { return js.groups[ref.Group][ref.ID] }

// put sets the job of ref.
func (js *Jobs) put(ref fairway.JobRef, j *Job) {
	g := js.groups[ref.Group]
	if g == nil {
		g = map[string]*Job{}
		js.groups[ref.Group] = g
	}
	if _, ok := g[ref.ID]; !ok {
		js.n++
	}
	g[ref.ID] = j
}

// remove removes the job of ref, if any.
func (js *Jobs) remove(ref fairway.JobRef) {
	g := js.groups[ref.Group]
	if _, ok := g[ref.ID]; !ok {
		return
	}
	delete(g, ref.ID)
	js.n--
	if len(g) == 0 {
		delete(js.groups, ref.Group)
	}
}

// Len is how many jobs there are.
func (js *Jobs) Len() int { return js.n }

// All are the jobs, in no order.
func (js *Jobs) All() iter.Seq2[fairway.JobRef, *Job] {
	return func(yield func(fairway.JobRef, *Job) bool) {
		for g, jobs := range js.groups {
			for id, j := range jobs {
				if !yield(fairway.JobRef{Group: g, ID: id}, j) {
					return
				}
			}
		}
	}
}
