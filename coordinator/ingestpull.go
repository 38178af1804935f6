package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errConsumerGone is a pull's answer when the group's consumer no longer
// exists (JetStream removed it after sourceInactive): it is made again.
var errConsumerGone = errors.New("the consumer does not exist")

// pullTimeout bounds a pull that JetStream never ends (it always does:
// with the batch, the bytes, or a status).
const pullTimeout = 5 * time.Second

// puller pulls from consumers for one fetcher, one pull at a time, through
// one subscription that it keeps: a pull's replies come to an inbox of its
// own under the puller's prefix. A subscription made and dropped for each
// pull cost the server a SUB and an UNSUB for every pull, about one a job
// with short jobs, and the pull a channel of a thousand messages.
type puller struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	ch     chan *nats.Msg
	prefix string
	n      uint64
}

// pullerBuffer is how many messages a puller's channel holds: a pull's
// batch of up to 1,024 and its status message, which the fetcher takes
// out as they come (a larger batch relies on that, as it did with a
// channel per pull of this size).
const pullerBuffer = 1024 + 8

// newPuller subscribes to a new inbox prefix of nc's.
func newPuller(nc *nats.Conn) (*puller, error) {
	p := &puller{nc: nc, ch: make(chan *nats.Msg, pullerBuffer)}
	if err := p.renew(); err != nil {
		return nil, err
	}
	return p, nil
}

// close drops the puller's subscription.
func (p *puller) close() {
	if p.sub != nil {
		_ = p.sub.Unsubscribe()
	}
}

// renew drops the puller's subscription, if any, for one under a new
// prefix: its first, and after a pull that JetStream did not end. That
// pull's request may still reach the server (held in nats.go's buffer
// through a reconnect), and with no interest in its inbox any more
// JetStream delivers nothing to it, as when each pull had a subscription
// of its own; otherwise its messages would come to a later pull of
// another consumer, be dropped there and wait unannounced for their ack
// wait and a sweep. What the channel holds is an earlier pull's: it goes
// too (what comes after is told apart by pull).
func (p *puller) renew() error {
	p.close()
	p.sub = nil
	for len(p.ch) > 0 {
		<-p.ch
	}
	p.prefix = p.nc.NewInbox()
	sub, err := p.nc.ChanSubscribe(p.prefix+".*", p.ch)
	if err != nil {
		return err
	}
	p.sub = sub
	return nil
}

// pull asks a consumer for up to batch messages and maxBytes of them,
// without waiting for more than it has (JetStream's no_wait), and hands
// each to deliver as it arrives; it returns how many came, and drained
// when JetStream ended the pull for want of more (it had no more then,
// rather than the pull reaching its batch or bytes). With wait, a
// consumer that has none waits up to that long for a first one (no_wait
// with expires: JetStream ends the pull as soon as it has delivered some). nats.go's
// FetchNoWait cannot bound bytes and its Fetch waits until its expiry
// once the consumer has nothing left: a fetcher taking groups in turn
// would spend that wait on every group. A pull cut by pullTimeout renews
// the subscription (renew); what still comes for an earlier pull from
// another consumer is dropped (JetStream delivers those messages again
// after their ack wait), from the same consumer it is this pull's (a
// message does not come on the pull's inbox but on its own subject, its
// consumer named in its reply, the ack subject; a status comes on the
// inbox).
func (p *puller) pull(ctx context.Context, stream, consumer string, batch, maxBytes int, wait time.Duration, deliver func(jetstream.Msg)) (n int, drained bool, err error) {
	if p.sub == nil { // a renewal failed (the connection closed): again
		if err := p.renew(); err != nil {
			return 0, false, err
		}
	}
	p.n++
	inbox := p.prefix + "." + strconv.FormatUint(p.n, 36)
	req, err := json.Marshal(struct {
		Batch    int           `json:"batch"`
		MaxBytes int           `json:"max_bytes"`
		NoWait   bool          `json:"no_wait"`
		Expires  time.Duration `json:"expires,omitempty"`
	}{batch, maxBytes, true, wait})
	if err != nil {
		return 0, false, err
	}
	if err := p.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+stream+"."+consumer, inbox, req); err != nil {
		return 0, false, err
	}
	timeout := time.NewTimer(pullTimeout)
	defer timeout.Stop()
	bytes := 0
	for {
		select {
		case m := <-p.ch:
			if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
				if m.Subject != inbox {
					continue // an earlier pull's
				}
				switch status {
				case "100": // a heartbeat
					continue
				case "404", "408": // no more messages; the request ended
					return n, true, nil
				case "409":
					if desc := m.Header.Get("Description"); desc == "Consumer Deleted" {
						return n, false, errConsumerGone
					}
					return n, false, nil // max bytes, max waiting: this pull is over
				case "503": // no responders: no such consumer
					return n, false, errConsumerGone
				}
				return n, false, fmt.Errorf("pulling from %s/%s: status %s %s", stream, consumer, status, m.Header.Get("Description"))
			}
			// A message comes on its own subject; its consumer is named
			// in its reply (the ack subject).
			if md, err := m.Metadata(); err != nil || md.Stream != stream || md.Consumer != consumer {
				continue // an earlier pull's, from another consumer
			}
			deliver(pulledMsg{m: m, nc: p.nc})
			n++
			bytes += m.Size()
			if n == batch || bytes >= maxBytes {
				return n, false, nil
			}
		case <-timeout.C:
			return n, false, p.renew()
		case <-ctx.Done():
			return n, false, ctx.Err()
		}
	}
}

// pulledMsg is a message of a pull (pullNoWait) as jetstream.Msg: the
// acknowledgements are those of nats.go's jetstream package, published to
// the message's reply subject.
type pulledMsg struct {
	m  *nats.Msg
	nc *nats.Conn
}

var _ jetstream.Msg = pulledMsg{}

func (p pulledMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := p.m.Metadata()
	if err != nil {
		return nil, err
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: md.Sequence.Consumer, Stream: md.Sequence.Stream},
		NumDelivered: md.NumDelivered, NumPending: md.NumPending, Timestamp: md.Timestamp,
		Stream: md.Stream, Consumer: md.Consumer, Domain: md.Domain,
	}, nil
}

func (p pulledMsg) Data() []byte         { return p.m.Data }
func (p pulledMsg) Headers() nats.Header { return p.m.Header }
func (p pulledMsg) Subject() string      { return p.m.Subject }
func (p pulledMsg) Reply() string        { return p.m.Reply }
func (p pulledMsg) Ack() error           { return p.ack("+ACK") }
func (p pulledMsg) Nak() error           { return p.ack("-NAK") }
func (p pulledMsg) InProgress() error    { return p.ack("+WPI") }
func (p pulledMsg) Term() error          { return p.ack("+TERM") }

func (p pulledMsg) NakWithDelay(delay time.Duration) error {
	return p.ack(`-NAK {"delay": ` + strconv.FormatInt(delay.Nanoseconds(), 10) + `}`)
}

func (p pulledMsg) TermWithReason(reason string) error {
	if reason == "" {
		return p.Term()
	}
	return p.ack("+TERM " + reason)
}

// DoubleAck acknowledges and waits for JetStream to confirm it.
func (p pulledMsg) DoubleAck(ctx context.Context) error {
	if p.m.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	_, err := p.nc.RequestWithContext(ctx, p.m.Reply, []byte("+ACK"))
	return err
}

func (p pulledMsg) ack(body string) error {
	if p.m.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	return p.nc.Publish(p.m.Reply, []byte(body))
}
