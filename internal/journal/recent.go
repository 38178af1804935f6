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
	rows       map[int64]*recentRow
}

// recentRow is a submitted row's time and body.
type recentRow struct {
	at   time.Time
	body []byte
	// offsets are where each item of a binary body begins, found at the
	// first claim of its jobs (itemOffsets): the next claims of a row of
	// thousands of jobs, a few at a time, read their items directly
	// instead of stepping over every item before them each time (a tenth
	// of the coordinator's CPU with short jobs, docs/performance.md).
	offsets []uint32
}

func newRecentRows(max int) *recentRows {
	return &recentRows{max: max, rows: map[int64]*recentRow{}}
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
		r.bytes -= r.rows[old].size()
		delete(r.rows, old)
	}
	r.rows[id] = &recentRow{at: at, body: body}
	r.order = append(r.order, id)
	r.bytes += len(body)
}

// get returns row id's time and body, if kept.
func (r *recentRows) get(id int64) (recentRow, bool) {
	row, ok := r.rows[id]
	if !ok {
		return recentRow{}, false
	}
	return *row, true
}

// decodeSome reads the items at the indexes want of row id, if kept
// (ok false when not), with the row's time, through its items' offsets,
// found at the first call and counted in the bound from then on.
func (r *recentRows) decodeSome(id int64, want []int32) (sub submittedRow, ok bool, err error) {
	row, ok := r.rows[id]
	if !ok {
		return submittedRow{}, false, nil
	}
	sub.at = row.at
	if len(row.body) == 0 || row.body[0] != binaryBatch {
		sub.items, err = decodeSome(row.body, want)
		return sub, true, err
	}
	if row.offsets == nil {
		if row.offsets, err = itemOffsets(row.body[1:]); err != nil {
			return sub, true, err
		}
		r.bytes += 4 * len(row.offsets)
	}
	sub.items, err = decodeBinaryAt(row.body[1:], row.offsets, want)
	return sub, true, err
}

// size is what row counts in the bound: its body, and its offsets once
// found.
func (row *recentRow) size() int { return len(row.body) + 4*len(row.offsets) }
