package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A binary batch: a count of items, then each item as a mask of the
// fields it has, then those fields in the order of batchFields, strings
// and bytes as a length and the bytes, numbers as varints (floats as
// their 8 bytes), flags in the mask. JSON costs the fold 6.4 µs per job (BenchmarkFoldJobLifecycle);
// this a fraction of it, and a binary body's args are not copied.
type field uint32

const (
	fID field = 1 << iota
	fAttempt
	fTask
	fPriority
	fRunAt
	fMaxRetries
	fPending
	fWaits
	fExpiresAt
	fTimeout
	fTracker
	fSubject
	fSubmitter
	fTraceParent
	fArgs
	fExecutor
	fInstance
	fProgress
	fOutcome
	fPermanent
	fCounted
	fResult
	fError
	fCharge
	fRanMS
	fWeight
	fStarts
	fPeriodMS
	fClaim
	fTrigger
	fSubmitted
	// fExt: the item ends with its extension, the fields added once the
	// mask was full (ext): a length, then a mask of its own and those
	// fields. A reader skips the extension's fields it does not know, so
	// that a field added later does not break it.
	fExt
)

// The fields of an item's extension (fExt), in its own mask and order.
// New ones go at the end.
const (
	eGiveBack field = 1 << iota
	eEndedAt
)

// maxRowItems bounds the items of a row (Encode): a Job holds its item's
// index in posIndexBits bits, and a leader reads a whole row to publish or
// claim from it. Submit writes more as several rows. A variable for the
// tests.
var maxRowItems = 100_000

// checkRowItems refuses a row of n items, more than maxRowItems.
func checkRowItems(n int) error {
	if n > maxRowItems {
		return fmt.Errorf("a journal row holds at most %d items, not %d: append them as several rows", maxRowItems, n)
	}
	return nil
}

// Encode makes a row's body of a batch (binary), of at most maxRowItems
// items.
func Encode(items []Item) ([]byte, error) {
	if err := checkRowItems(len(items)); err != nil {
		return nil, err
	}
	out := make([]byte, 0, 16+len(items)*48)
	out = append(out, binaryBatch)
	out = binary.AppendUvarint(out, uint64(len(items)))
	var fields []byte // an item's fields, written as its mask is made
	for _, it := range items {
		var mask field
		fields = fields[:0]
		str := func(f field, v string) {
			if v != "" {
				mask |= f
				fields = appendString(fields, v)
			}
		}
		num := func(f field, v int64) {
			if v != 0 {
				mask |= f
				fields = binary.AppendVarint(fields, v)
			}
		}
		float := func(f field, v float64) {
			if v != 0 {
				mask |= f
				fields = appendFloat(fields, v)
			}
		}
		flag := func(f field, v bool) {
			if v {
				mask |= f
			}
		}
		str(fID, it.ID)
		num(fAttempt, int64(it.Attempt))
		str(fTask, it.Task)
		str(fPriority, it.Priority)
		num(fRunAt, it.RunAt)
		num(fMaxRetries, int64(it.MaxRetries))
		flag(fPending, it.Pending)
		flag(fTrigger, it.Trigger)
		if len(it.Waits) > 0 {
			mask |= fWaits
			fields = appendStrings(fields, it.Waits)
		}
		num(fExpiresAt, it.ExpiresAt)
		str(fTimeout, it.Timeout)
		str(fTracker, it.Tracker)
		str(fSubject, it.Subject)
		str(fSubmitter, it.Submitter)
		str(fTraceParent, it.TraceParent)
		str(fArgs, string(it.Args))
		str(fExecutor, it.Executor)
		str(fInstance, it.Instance)
		num(fProgress, int64(it.Progress))
		str(fOutcome, it.Outcome)
		flag(fPermanent, it.Permanent)
		flag(fCounted, it.Counted)
		str(fResult, string(it.Result))
		str(fError, it.Error)
		float(fCharge, it.Charge)
		float(fRanMS, it.RanMS)
		float(fWeight, it.Weight)
		float(fStarts, it.Starts)
		num(fPeriodMS, it.PeriodMS)
		str(fClaim, it.Claim)
		num(fSubmitted, it.Submitted)
		if ext := appendExt(nil, it); ext != nil {
			mask |= fExt
			fields = binary.AppendUvarint(fields, uint64(len(ext)))
			fields = append(fields, ext...)
		}
		out = binary.AppendUvarint(out, uint64(mask))
		out = appendString(out, it.Group)
		out = append(out, fields...)
	}
	return out, nil
}

// decodeBinary reads a binary batch after its first byte.
func decodeBinary(b []byte) ([]Item, error) {
	d := snapshotDecoder{b: b}
	items := make([]Item, d.count())
	for i := range items {
		decodeItem(&d, &items[i])
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errors.New("decoding a journal batch: it is cut short or corrupt")
	}
	return items, nil
}

// decodeBinarySome reads the items at the indexes want of a binary batch
// after its first byte, and steps over the others without making their
// strings: a claim of 100 jobs whose submissions share a row of 10,000
// no longer makes 10,000 items to keep 100 (bench scale, where that and
// its collection were most of the leader's CPU). An index past the batch
// is left out.
func decodeBinarySome(b []byte, want []int32) (map[int32]Item, error) {
	d := snapshotDecoder{b: b}
	n := d.count()
	wanted := make(map[int32]bool, len(want))
	for _, i := range want {
		wanted[i] = true
	}
	out := make(map[int32]Item, len(want))
	var skipped Item
	for i := range n {
		index := int32(i) //nolint:gosec // G115: a batch holds far fewer than 2^31 items
		if wanted[index] {
			var it Item
			decodeItem(&d, &it)
			out[index] = it
			continue
		}
		d.skip = true
		decodeItem(&d, &skipped)
		d.skip = false
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errors.New("decoding a journal batch: it is cut short or corrupt")
	}
	return out, nil
}

// itemOffsets returns where each item of a binary batch (after its first
// byte) begins, stepping over every item once without making its strings:
// decodeBinaryAt then reads any of them without the ones before it.
func itemOffsets(b []byte) ([]uint32, error) {
	d := snapshotDecoder{b: b, skip: true}
	n := d.count()
	offsets := make([]uint32, n)
	var skipped Item
	for i := range offsets {
		offsets[i] = uint32(len(b) - len(d.b)) //nolint:gosec // G115: a body is far below 4 GiB (maxRowItems, the row's bound)
		decodeItem(&d, &skipped)
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errors.New("decoding a journal batch: it is cut short or corrupt")
	}
	return offsets, nil
}

// decodeBinaryAt reads the items at the indexes want of a binary batch
// (after its first byte) whose items begin at offsets (itemOffsets); an
// index past the batch is left out.
func decodeBinaryAt(b []byte, offsets []uint32, want []int32) (map[int32]Item, error) {
	out := make(map[int32]Item, len(want))
	for _, i := range want {
		if i < 0 || int(i) >= len(offsets) {
			continue
		}
		d := snapshotDecoder{b: b[offsets[i]:]}
		var it Item
		decodeItem(&d, &it)
		if d.err != nil {
			return nil, errors.New("decoding a journal batch: it is cut short or corrupt")
		}
		out[i] = it
	}
	return out, nil
}

// decodeItem reads one item of a binary batch into it (its strings empty
// while d.skip).
func decodeItem(d *snapshotDecoder, it *Item) {
	m := field(min(d.uvarint(), math.MaxUint32))
	it.Group = d.string()
	it.ID = d.optString(m, fID)
	it.Attempt = d.optInt32(m, fAttempt)
	it.Task = d.optString(m, fTask)
	it.Priority = d.optString(m, fPriority)
	it.RunAt = d.optVarint(m, fRunAt)
	it.MaxRetries = d.optInt32(m, fMaxRetries)
	it.Pending = m&fPending != 0
	it.Trigger = m&fTrigger != 0
	if m&fWaits != 0 {
		it.Waits = d.strings()
	}
	it.ExpiresAt = d.optVarint(m, fExpiresAt)
	it.Timeout = d.optString(m, fTimeout)
	it.Tracker = d.optString(m, fTracker)
	it.Subject = d.optString(m, fSubject)
	it.Submitter = d.optString(m, fSubmitter)
	it.TraceParent = d.optString(m, fTraceParent)
	it.Args = d.optBytes(m, fArgs)
	it.Executor = d.optString(m, fExecutor)
	it.Instance = d.optString(m, fInstance)
	progress := d.optInt32(m, fProgress)
	if progress < math.MinInt16 || progress > math.MaxInt16 {
		d.fail()
	}
	it.Progress = int16(progress) //nolint:gosec // G115: checked above
	it.Outcome = d.optString(m, fOutcome)
	it.Permanent = m&fPermanent != 0
	it.Counted = m&fCounted != 0
	it.Result = d.optBytes(m, fResult)
	it.Error = d.optString(m, fError)
	it.Charge = d.optFloat(m, fCharge)
	it.RanMS = d.optFloat(m, fRanMS)
	it.Weight = d.optFloat(m, fWeight)
	it.Starts = d.optFloat(m, fStarts)
	it.PeriodMS = d.optVarint(m, fPeriodMS)
	it.Claim = d.optString(m, fClaim)
	it.Submitted = d.optVarint(m, fSubmitted)
	if m&fExt != 0 {
		n := d.count()
		ext := snapshotDecoder{b: d.b[:n:n]}
		d.b = d.b[n:]
		if !d.skip {
			decodeExt(&ext, it)
			if ext.err != nil {
				d.fail()
			}
		}
	}
}

// appendExt appends an item's extension (fExt: its fields past the
// mask's 32) to b; nil when it has none.
func appendExt(b []byte, it Item) []byte {
	var mask field
	var fields []byte
	if it.GiveBack {
		mask |= eGiveBack
	}
	if it.EndedAt != 0 {
		mask |= eEndedAt
		fields = binary.AppendVarint(fields, it.EndedAt)
	}
	if mask == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(mask))
	return append(b, fields...)
}

// decodeExt reads an item's extension; bits it does not know (a newer
// writer's fields, after the known ones) are left unread.
func decodeExt(d *snapshotDecoder, it *Item) {
	m := field(d.uvarint() & math.MaxUint32) // bits past 32: fields of a later version, after these
	it.GiveBack = m&eGiveBack != 0
	it.EndedAt = d.optVarint(m, eEndedAt)
}

// The optional fields of a batch's item: read when the item's mask has
// them, else their zero value.

func (d *snapshotDecoder) optString(m, f field) string {
	if m&f == 0 {
		return ""
	}
	return d.string()
}

func (d *snapshotDecoder) optVarint(m, f field) int64 {
	if m&f == 0 {
		return 0
	}
	return d.varint()
}

func (d *snapshotDecoder) optInt32(m, f field) int32 {
	if m&f == 0 {
		return 0
	}
	return d.int32()
}

func (d *snapshotDecoder) optFloat(m, f field) float64 {
	if m&f == 0 {
		return 0
	}
	return d.float()
}

// optBytes is a slice of the body, not a copy.
func (d *snapshotDecoder) optBytes(m, f field) []byte {
	if m&f == 0 {
		return nil
	}
	n := d.count()
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// batchCount is how many items a body in the binary form holds (-1 for
// another form, or none readable).
func batchCount(body []byte) int {
	if len(body) < 2 || body[0] != binaryBatch {
		return -1
	}
	n, k := binary.Uvarint(body[1:])
	if k <= 0 || n > math.MaxInt32 {
		return -1
	}
	return int(n)
}
