package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The kinds of dead letters: the last token of their subject,
// <prefix>.dead.<kind>.
const (
	DeadSubmit = "submit" // a submission that could not be stored
	DeadReport = "report" // an executor report that could not be decoded or applied
	DeadEvent  = "event"  // a lifecycle event that JetStream refused
)

// Headers of a dead letter; its body is the original message's (cut to
// fit max_payload, see HeaderDeadSize).
const (
	HeaderDeadSubject    = "Fairway-Subject"    // the original subject
	HeaderDeadReason     = "Fairway-Reason"     // why it could never be applied
	HeaderDeadDeliveries = "Fairway-Deliveries" // how often it was delivered
	HeaderDeadSize       = "Fairway-Size"       // the original body's size in bytes
)

// maxDeadReason caps the reason header.
const maxDeadReason = 1 << 10

// DeadLetterMsg builds the dead letter of a message that could never be
// applied. The body is cut so that the message fits in maxPayload.
func DeadLetterMsg(s Subjects, kind, subject, reason string, deliveries uint64, body []byte, maxPayload int64) *nats.Msg {
	if len(reason) > maxDeadReason {
		reason = reason[:maxDeadReason]
	}
	h := nats.Header{}
	h.Set(HeaderDeadSubject, subject)
	h.Set(HeaderDeadReason, reason)
	h.Set(HeaderDeadDeliveries, strconv.FormatUint(deliveries, 10))
	h.Set(HeaderDeadSize, strconv.Itoa(len(body)))
	// Room for the headers and the protocol line.
	if room := maxPayload - int64(len(subject)+len(reason)) - 1024; int64(len(body)) > room {
		body = body[:max(room, 0)]
	}
	return &nats.Msg{Subject: s.Dead(kind), Header: h, Data: body}
}

// DeadLetter is a message that could never be applied, as kept in the
// dead-letter stream.
type DeadLetter struct {
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Subject    string    `json:"subject"`
	Reason     string    `json:"reason"`
	Deliveries int       `json:"deliveries"`
	Size       int       `json:"size"`
	// Body is the original body, cut when it did not fit (len(Body) < Size).
	Body string `json:"body"`
}

// ListDeadLetters returns the newest dead letters, at most limit, oldest
// first.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, s Subjects, limit int) ([]DeadLetter, error) {
	stream, err := js.Stream(ctx, s.DeadStream())
	if err != nil {
		return nil, fmt.Errorf("opening stream %s: %w", s.DeadStream(), err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", s.DeadStream(), err)
	}
	var out []DeadLetter
	first := info.State.FirstSeq
	if limit > 0 && info.State.LastSeq >= uint64(limit) {
		first = max(first, info.State.LastSeq-uint64(limit)+1)
	}
	for seq := first; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // aged out or removed
		}
		if err != nil {
			return nil, fmt.Errorf("reading dead letter %d: %w", seq, err)
		}
		d := DeadLetter{Seq: m.Sequence, Time: m.Time, Subject: m.Header.Get(HeaderDeadSubject),
			Reason: m.Header.Get(HeaderDeadReason), Body: string(m.Data)}
		d.Kind = lastToken(m.Subject)
		d.Deliveries, _ = strconv.Atoi(m.Header.Get(HeaderDeadDeliveries))
		d.Size, _ = strconv.Atoi(m.Header.Get(HeaderDeadSize))
		out = append(out, d)
	}
	return out, nil
}

func lastToken(subject string) string {
	for i := len(subject) - 1; i >= 0; i-- {
		if subject[i] == '.' {
			return subject[i+1:]
		}
	}
	return subject
}
