package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unique"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
)

// A snapshot is the state in a compact binary form: a new leader restores
// 1,000,000 waiting jobs in a fraction of the 3 s it has to resume
// dispatch (condition 4 of issue 31; as JSON, restoring alone took 2.8 s
// and encoding 4.5 s: BenchmarkSnapshotOfAMillionWaitingJobs). Names
// (groups, tasks, priorities, executors, instances) are written once, in
// a table, and jobs refer to them by index; numbers are varints.
//
//	version byte (snapshotVersion)
//	names:      count, then each name (length, bytes)
//	jobs:       count, then each job: group, id, task, state, priority,
//	            run at, expires at, row, index, attempt, retries, max
//	            retries, progress, timeout, flags (1: held, 2: cancel
//	            requested, 4: released at its run at),
//	            executor, instance, scheduled, started and the claim's
//	            request id when held,
//	            waits (count, ids)
//	dependents: count, then each: group, id, ids (count, ids)
//	depends on: count of groups, then each: group, count of jobs, then
//	            each: id, ids (count, ids); not in version 7
//	paused:     count, then each group
//	trackers:   count, then each: group, tracker, the id of the job
//	            that holds it
//	cursor:     its group, its counter
//	shares:     the clock; virtual times (count, then each: group,
//	            time); weights (count, then each: group, weight); run
//	            times (count, then each: group, task, milliseconds);
//	            floats as their 8 bytes
//	rates:      limits (count, then each: task, group, starts, period in
//	            milliseconds); buckets (count, then each: key, tokens,
//	            time)
const snapshotVersion = 8

// stateCodes number the states a job of a State may be in.
var stateCodes = []fairway.State{fairway.StatePending, fairway.StateWaiting, fairway.StateScheduled, fairway.StateRunning, fairway.StateStuck}

// Snapshot encodes the state (SaveSnapshot stores it with the tail's
// position: a reader that restores both and applies the rows the tail
// reads next holds what the leader holds).
func (s *State) Snapshot() ([]byte, error) {
	var out []byte
	err := s.snapshotParts(1<<62, func(part []byte) error {
		out = append(out, part...)
		return nil
	})
	return out, err
}

// snapshotParts encodes the state as Snapshot does, handing it to flush
// in parts of about size bytes (the last one may be shorter), one buffer
// reused: a million waiting jobs are tens of MiB, which the leader would
// otherwise hold twice (its encoding, and pgx's) while it stores them.
func (s *State) snapshotParts(size int, flush func([]byte) error) error {
	e := snapshotEncoder{names: map[string]uint64{}}
	for ref, j := range s.Jobs.All() {
		e.name(ref.Group)
		e.name(j.Task)
		e.name(j.Priority())
		if j.Holder != nil {
			e.name(j.Holder.Executor)
			e.name(j.Holder.Instance)
		}
	}
	for ref := range s.Dependents {
		e.name(ref.Group)
	}
	for g := range s.DependsOn {
		e.name(g)
	}
	for g := range s.Paused {
		e.name(g)
	}
	for key := range s.Trackers {
		e.name(key.Group)
	}
	e.name(s.Cursor.Group)
	for g := range s.Shares.VTimes {
		e.name(g)
	}
	for g := range s.Shares.Weights {
		e.name(g)
	}
	for k := range s.Shares.RunMS {
		e.name(k[0])
		e.name(k[1])
	}
	for k := range s.Rates.Limits {
		e.name(k[0])
		e.name(k[1])
	}
	out := make([]byte, 0, min(size+4096, 64+s.Jobs.Len()*64))
	// full hands on a part once it reached size.
	full := func() error {
		if len(out) < size {
			return nil
		}
		err := flush(out)
		out = out[:0]
		return err
	}
	out = append(out, snapshotVersion)
	out = binary.AppendUvarint(out, uint64(len(e.list)))
	for _, n := range e.list {
		out = appendString(out, n)
	}
	out = binary.AppendUvarint(out, uint64(s.Jobs.Len())) //nolint:gosec // G115: a count
	for ref, j := range s.Jobs.All() {
		code := -1
		for c, st := range stateCodes {
			if st == j.State() {
				code = c
			}
		}
		if code < 0 {
			return fmt.Errorf("job %s/%s is %q, which a snapshot cannot hold", ref.Group, ref.ID, j.State())
		}
		if err := full(); err != nil {
			return err
		}
		out = binary.AppendUvarint(out, e.names[ref.Group])
		out = appendString(out, ref.ID)
		out = binary.AppendUvarint(out, e.names[j.Task])
		out = append(out, byte(code))
		out = binary.AppendUvarint(out, e.names[j.Priority()])
		for _, v := range []int64{j.RunAt, j.ExpiresAt(), j.Row(), int64(j.Index()), int64(j.Attempt), int64(j.Retries), int64(j.MaxRetries), int64(j.Progress), int64(j.TimeoutS)} {
			out = binary.AppendVarint(out, v)
		}
		var flags byte
		if j.Holder != nil {
			flags |= 1
		}
		if j.CancelRequested() {
			flags |= 2
		}
		if j.Triggered() {
			flags |= 4
		}
		out = append(out, flags)
		if j.Holder != nil {
			out = binary.AppendUvarint(out, e.names[j.Holder.Executor])
			out = binary.AppendUvarint(out, e.names[j.Holder.Instance])
			out = binary.AppendVarint(out, j.Holder.Scheduled)
			out = binary.AppendVarint(out, j.Holder.Started)
			out = appendString(out, j.Holder.Claim)
		}
		out = appendStrings(out, j.Waits())
	}
	out = binary.AppendUvarint(out, uint64(len(s.Dependents)))
	for ref, ids := range s.Dependents {
		out = binary.AppendUvarint(out, e.names[ref.Group])
		out = appendString(out, ref.ID)
		out = appendStrings(out, ids)
		if err := full(); err != nil {
			return err
		}
	}
	out = binary.AppendUvarint(out, uint64(len(s.DependsOn)))
	for g, jobs := range s.DependsOn {
		out = binary.AppendUvarint(out, e.names[g])
		out = binary.AppendUvarint(out, uint64(len(jobs)))
		for id, ids := range jobs {
			out = appendStrings(appendString(out, id), ids)
			if err := full(); err != nil {
				return err
			}
		}
	}
	out = binary.AppendUvarint(out, uint64(len(s.Paused)))
	for g := range s.Paused {
		out = binary.AppendUvarint(out, e.names[g])
	}
	out = binary.AppendUvarint(out, uint64(len(s.Trackers)))
	for key, id := range s.Trackers {
		out = binary.AppendUvarint(out, e.names[key.Group])
		out = appendString(out, key.ID)
		out = appendString(out, id)
		if err := full(); err != nil {
			return err
		}
	}
	out = binary.AppendUvarint(out, e.names[s.Cursor.Group])
	out = binary.AppendVarint(out, s.Cursor.Counter)
	out = appendFloat(out, s.Shares.Clock)
	for _, m := range []map[string]float64{s.Shares.VTimes, s.Shares.Weights} {
		out = binary.AppendUvarint(out, uint64(len(m)))
		for g, v := range m {
			out = appendFloat(binary.AppendUvarint(out, e.names[g]), v)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(s.Shares.RunMS)))
	for k, v := range s.Shares.RunMS {
		out = binary.AppendUvarint(out, e.names[k[0]])
		out = appendFloat(binary.AppendUvarint(out, e.names[k[1]]), v)
	}
	out = binary.AppendUvarint(out, uint64(len(s.Rates.Limits)))
	for k, l := range s.Rates.Limits {
		out = binary.AppendUvarint(out, e.names[k[0]])
		out = appendFloat(binary.AppendUvarint(out, e.names[k[1]]), l.Starts)
		out = binary.AppendVarint(out, l.Period.Milliseconds())
	}
	out = binary.AppendUvarint(out, uint64(len(s.Rates.Buckets)))
	for k, b := range s.Rates.Buckets {
		out = binary.AppendVarint(appendFloat(appendString(out, k), b.Tokens), b.At)
	}
	return flush(out)
}

// Restore reads a snapshot.
func Restore(b []byte) (*State, error) {
	// Version 7 is version 8 without flag 4: its pending jobs with a
	// trigger were restored as pending for good (they did not release
	// themselves). Read, so that an upgrade starts; the leader's next
	// snapshot is version 8.
	if len(b) == 0 || (b[0] != snapshotVersion && b[0] != 7) {
		return nil, fmt.Errorf("reading a journal snapshot: an unknown format (first byte %v; this build reads %d)", b[:min(1, len(b))], snapshotVersion)
	}
	d := snapshotDecoder{b: b[1:]}
	names := make([]string, d.count())
	for i := range names {
		names[i] = unique.Make(d.string()).Value()
	}
	name := func() string {
		i := d.uvarint()
		if i >= uint64(len(names)) {
			d.fail()
			return ""
		}
		return names[i]
	}
	s := NewState()
	n := d.count()
	for range n {
		ref := fairway.JobRef{Group: name(), ID: d.string()}
		j := &Job{Task: name()}
		code := d.byte()
		if int(code) >= len(stateCodes) {
			d.fail()
			break
		}
		j.state = jobStateCode(code)
		j.setPriority(name())
		var expiresAt, row int64
		j.RunAt, expiresAt, row = d.varint(), d.varint(), d.varint()
		index := d.int32()
		if row < 0 || index < 0 || index >= 1<<posIndexBits {
			d.fail()
			break
		}
		j.setPlace(row, index)
		j.setExpiresAt(expiresAt)
		j.Attempt, j.Retries, j.MaxRetries = d.int32(), retryCount(d.int32()), retryCount(d.int32())
		j.Progress = progressOf(d.int32())
		j.TimeoutS = d.int32()
		flags := d.byte()
		if flags&1 != 0 {
			j.Holder = &Holder{Executor: name(), Instance: name(), Scheduled: d.varint(), Started: d.varint(), Claim: d.string()}
		}
		j.setCancelRequested(flags&2 != 0)
		j.setTriggered(flags&4 != 0)
		j.setWaits(d.strings())
		s.Jobs.put(ref, j)
		s.Rows[j.Row()]++
		count(s.Live, ref.Group, 1)
		count(s.Counts, CountKey{ref.Group, j.Task, j.State()}, 1)
		if held(j.State()) {
			s.hold(ref, j, 1)
		}
	}
	for range d.count() {
		ref := fairway.JobRef{Group: name(), ID: d.string()}
		s.Dependents[ref] = d.strings()
	}
	if b[0] == 7 {
		// Version 7 kept no dependencies as submitted: those the pending
		// jobs still wait for are the best it knows.
		for ref, j := range s.Jobs.All() {
			if len(j.Waits()) > 0 {
				s.dependsOn(ref, slices.Clone(j.Waits()))
			}
		}
	} else {
		for range d.count() {
			g := name()
			for range d.count() {
				id := d.string()
				s.dependsOn(fairway.JobRef{Group: g, ID: id}, d.strings())
			}
		}
	}
	for range d.count() {
		s.Paused[name()] = true
	}
	for range d.count() {
		key := fairway.JobRef{Group: name(), ID: d.string()}
		id := d.string()
		s.Trackers[key] = id
		s.TrackerOf[fairway.JobRef{Group: key.Group, ID: id}] = key.ID
	}
	s.Cursor.Group = name()
	s.Cursor.Counter = d.varint()
	s.Shares.Clock = d.float()
	for _, m := range []map[string]float64{s.Shares.VTimes, s.Shares.Weights} {
		for range d.count() {
			g := name()
			m[g] = d.float()
		}
	}
	for range d.count() {
		k := [2]string{name(), name()}
		s.Shares.RunMS[k] = d.float()
	}
	for range d.count() {
		l := fairness.RateLimit{Task: name(), Group: name(), Starts: d.float()}
		l.Period = time.Duration(d.varint()) * time.Millisecond
		s.Rates.Limits[[2]string{l.Task, l.Group}] = l
	}
	for range d.count() {
		k := d.string()
		s.Rates.Buckets[k] = fairness.Bucket{Tokens: d.float(), At: d.varint()}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errors.New("reading a journal snapshot: it is cut short or corrupt")
	}
	return s, nil
}

// snapshotEncoder numbers the names a snapshot holds.
type snapshotEncoder struct {
	names map[string]uint64
	list  []string
}

func (e *snapshotEncoder) name(n string) {
	if _, ok := e.names[n]; !ok {
		e.names[n] = uint64(len(e.list))
		e.list = append(e.list, n)
	}
}

func appendString(out []byte, s string) []byte {
	return append(binary.AppendUvarint(out, uint64(len(s))), s...)
}

func appendStrings(out []byte, ss []string) []byte {
	out = binary.AppendUvarint(out, uint64(len(ss)))
	for _, s := range ss {
		out = appendString(out, s)
	}
	return out
}

// snapshotDecoder reads a snapshot's fields; the first error sticks and
// every read after it returns zero values.
type snapshotDecoder struct {
	b   []byte
	err error
	// skip: string and strings step over what they read and return
	// nothing (decodeBinarySome).
	skip bool
}

func (d *snapshotDecoder) fail() {
	if d.err == nil {
		d.err = errors.New("corrupt")
	}
	d.b = nil
}

func (d *snapshotDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *snapshotDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *snapshotDecoder) int32() int32 {
	v := d.varint()
	if v < -1<<31 || v >= 1<<31 {
		d.fail()
		return 0
	}
	return int32(v)
}

// count reads a length, bounded by the bytes left (each element takes
// one at least), so that a corrupt count allocates nothing large.
func (d *snapshotDecoder) count() int {
	v := d.uvarint()
	if v > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(v) //nolint:gosec // G115: at most len(d.b)
}

func (d *snapshotDecoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func appendFloat(out []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
}

func (d *snapshotDecoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *snapshotDecoder) string() string {
	n := d.count()
	var s string
	if !d.skip {
		s = string(d.b[:n])
	}
	d.b = d.b[n:]
	return s
}

func (d *snapshotDecoder) strings() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	if d.skip {
		for range n {
			d.string()
		}
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.string()
	}
	return out
}
