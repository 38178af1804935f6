package coordinator

import (
	"hash/fnv"
	"strconv"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
)

// eventBatchBytes caps the body of one batch of events: far below any
// message size a stream or server allows, so a batch is refused only for
// what its events carry (each event is a few KiB at most, see capEvent).
const eventBatchBytes = 256 << 10

// eventBatch is one message of events: events of one subject (group, task
// and state), in the order of their changes.
type eventBatch struct {
	subject string
	events  []int // indexes into the events read from the outbox
	data    []byte
	size    int // of data, once made
}

// id is the batch's Nats-Msg-Id: made of the ids of its events, so a
// batch published again after a failed acknowledgement is stored once.
func (b *eventBatch) id(evs []store.Event) string {
	h := fnv.New64a()
	for _, i := range b.events {
		_, _ = h.Write([]byte(evs[i].ID))
		_, _ = h.Write([]byte{0})
	}
	return "evb-" + evs[b.events[0]].ID + "-" + strconv.Itoa(len(b.events)) + "-" + strconv.FormatUint(h.Sum64(), 36)
}

// batchEvents groups events read from the outbox (in id order) into
// messages of one subject each, and orders the messages so that every
// job's events are published in the order of its changes.
//
// A job's events go to different subjects (one per state), so they cannot
// share a message. Each event gets a level: one more than the level of the
// job's previous event in this read when that one went to another subject,
// else the same. Messages are formed per subject and level and published
// level by level: a job's later event is always in a later message, or in
// the same one further on. A statement's events (a claim's scheduled
// events, say) share a level, so they share a message per subject. A
// message is closed at eventBatchBytes and another opened.
func batchEvents(evs []store.Event, subject func(store.Event) string, encode func([]byte, store.Event) ([]byte, error)) ([]*eventBatch, error) {
	type key struct {
		subject string
		level   int
	}
	type jobKey struct{ group, id string }
	type last struct {
		subject string
		level   int
	}
	open := map[key]*eventBatch{}
	var order []*eventBatch // in the order batches were opened
	levelOf := make([]int, len(evs))
	prev := make(map[jobKey]last, len(evs))
	// subjects names each (group, task, state)'s subject once per read.
	type subjectKey struct {
		group, task string
		state       fairway.State
	}
	subjects := map[subjectKey]string{}
	maxLevel := 0
	// The events' encodings, one after the other (spans: where each is),
	// and then each message made at its size: appended to as they came,
	// the messages grew by copies (a quarter of this function's time in
	// a drain's profile).
	all := make([]byte, 0, 256*len(evs))
	spans := make([][2]int, len(evs))
	for i, e := range evs {
		sk := subjectKey{e.Group, e.Task, e.State}
		subj, ok := subjects[sk]
		if !ok {
			subj = subject(e)
			subjects[sk] = subj
		}
		level := 0
		if e.JobID != "" {
			jk := jobKey{e.Group, e.JobID}
			if p, ok := prev[jk]; ok {
				level = p.level
				if p.subject != subj {
					level++
				}
			}
			prev[jk] = last{subj, level}
		}
		levelOf[i] = level
		maxLevel = max(maxLevel, level)
		start := len(all)
		var err error
		if all, err = encode(all, e); err != nil {
			return nil, err
		}
		spans[i] = [2]int{start, len(all)}
		size := len(all) - start + 1 // and a comma, or the closing bracket
		k := key{subj, level}
		b := open[k]
		if b != nil && b.size+size > eventBatchBytes {
			b = nil // full: a new message follows it on the same level
		}
		if b == nil {
			b = &eventBatch{subject: subj, size: 1} // the opening bracket
			open[k] = b
			order = append(order, b)
		}
		b.size += size
		b.events = append(b.events, i)
	}
	out := make([]*eventBatch, 0, len(order))
	for level := 0; level <= maxLevel; level++ {
		for _, b := range order {
			if levelOf[b.events[0]] != level {
				continue
			}
			b.data = append(make([]byte, 0, b.size), '[')
			for n, i := range b.events {
				if n > 0 {
					b.data = append(b.data, ',')
				}
				b.data = append(b.data, all[spans[i][0]:spans[i][1]]...)
			}
			b.data = append(b.data, ']')
			out = append(out, b)
		}
	}
	return out, nil
}

// capEvent caps an outbox event's untrusted fields (what a tenant or an
// executor sent: ids, names and error text), so an event is a few KiB at
// most.
func capEvent(e store.Event) store.Event {
	name := func(s string) string { return fairway.TruncateRunes(s, fairway.MaxNameLength) }
	capped := e
	capped.JobID, capped.Task, capped.Group = fairway.TruncateRunes(e.JobID, fairway.MaxIDLength), name(e.Task), name(e.Group)
	capped.Error, capped.Field = fairway.TruncateBytes(e.Error, fairway.MaxErrorTextSize), name(e.Field)
	capped.Executor, capped.Periodic = name(e.Executor), name(e.Periodic)
	return capped
}

// encodeEvent encodes an outbox event, its untrusted fields capped, as
// json.Marshal would.
func encodeEvent(e store.Event) ([]byte, error) {
	return appendEvent(make([]byte, 0, 192+len(e.Error)), e)
}

// appendEvent appends encodeEvent's encoding of e to b (the hot path of
// publishing, so written out rather than reflected).
func appendEvent(b []byte, e store.Event) ([]byte, error) {
	e = capEvent(e)
	b = append(b, `{"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"job_id":`...)
	b = appendJSONString(b, e.JobID)
	b = append(b, `,"task":`...)
	b = appendJSONString(b, e.Task)
	b = append(b, `,"group":`...)
	b = appendJSONString(b, e.Group)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(e.State))
	if e.PreviousState != "" {
		b = append(b, `,"previous_state":`...)
		b = appendJSONString(b, string(e.PreviousState))
	}
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	for _, f := range [...]struct{ key, value string }{
		{`,"error":`, e.Error}, {`,"code":`, string(e.Code)}, {`,"field":`, e.Field},
		{`,"executor":`, e.Executor}, {`,"periodic":`, e.Periodic},
	} {
		if f.value != "" {
			b = append(b, f.key...)
			b = appendJSONString(b, f.value)
		}
	}
	b = append(b, `,"time":"`...)
	// time.Time's MarshalJSON, without its allocation.
	b, err := e.Time.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"', '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, bytes that are not UTF-8 replaced by U+FFFD,
// and <, >, &, U+2028 and U+2029 escaped as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
