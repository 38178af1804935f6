package journal

import "time"

// recentRows keeps the bodies of the submitted rows the leader folded or
// read last, up to a bound of bytes, so that a claim of their jobs takes
// the arguments from memory instead of reading the rows again from
// PostgreSQL (a round trip and a decode per claim). The oldest go first
// when the bound is reached; a claim of a job whose row went reads it
// (Leader.readArgs). The bound keeps the leader's memory within what
// condition 6 of issue 31 allows whatever the backlog: the state holds no
// arguments, and this holds at most max bytes of bodies.
type recentRows struct {
	max, bytes int
	order      []int64 // the rows kept, oldest first
	rows       map[int64]recentRow
}

// recentRow is a submitted row's time and body.
type recentRow struct {
	at   time.Time
	body []byte
}

func newRecentRows(max int) *recentRows {
	return &recentRows{max: max, rows: map[int64]recentRow{}}
}

// keep keeps row id's body (a body larger than the bound is not kept).
func (r *recentRows) keep(id int64, at time.Time, body []byte) {
	if len(body) > r.max {
		return
	}
	if _, ok := r.rows[id]; ok {
		return
	}
	for r.bytes+len(body) > r.max && len(r.order) > 0 {
		old := r.order[0]
		r.order = r.order[1:]
		r.bytes -= len(r.rows[old].body)
		delete(r.rows, old)
	}
	r.rows[id] = recentRow{at: at, body: body}
	r.order = append(r.order, id)
	r.bytes += len(body)
}

// get returns row id's time and body, if kept.
func (r *recentRows) get(id int64) (recentRow, bool) {
	row, ok := r.rows[id]
	return row, ok
}
