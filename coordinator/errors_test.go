package coordinator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// request sends body to subject and decodes the Reply.
func request(t *testing.T, nc *nats.Conn, subject string, body []byte) events.Reply {
	t.Helper()
	msg, err := nc.Request(subject, body, waitTimeout)
	require.NoError(t, err)
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply), "%s", msg.Data)
	return reply
}

// Text PostgreSQL cannot store (a NUL, bytes that are not UTF-8) is refused
// as invalid, naming the field, on the request/reply API and on the
// asynchronous submit stream, and the rejected event says the same.
func TestBadTextIsInvalidNamingTheField(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cases := []struct {
		name, body, field, message string
	}{
		{"NUL in args", `{"id":"nul-args","task":"echo","args":{"a":{"b":"x\u0000"}}}`, "args", "args.a.b contains a NUL"},
		{"invalid UTF-8 in subject", "{\"id\":\"utf8-subject\",\"task\":\"echo\",\"subject\":\"caf\xe9\"}", "subject", "not valid UTF-8"},
		{"NUL in submitter", `{"id":"nul-submitter","task":"echo","submitter":"\u0000"}`, "submitter", "NUL"},
		{"NUL in tracker", `{"id":"nul-tracker","task":"echo","tracker":"t\u0000"}`, "tracker", "NUL"},
		{"invalid UTF-8 in args", "{\"id\":\"utf8-args\",\"task\":\"echo\",\"args\":{\"a\":\"\xff\"}}", "args", "args.a is not valid UTF-8"},
		{"half a surrogate pair in args", `{"id":"surrogate-args","task":"echo","args":{"a":"\ud800"}}`, "args", "surrogate"},
	}
	for _, tc := range cases {
		reply := request(t, h.nc, "fairway.api.g.submit", []byte(tc.body))
		require.NotNil(t, reply.Error, tc.name)
		require.Equal(t, fairway.CodeInvalid, reply.Error.Code, "%s: %+v", tc.name, reply.Error)
		require.Equal(t, tc.field, reply.Error.Field, tc.name)
		require.Contains(t, reply.Error.Message, tc.message, tc.name)
		require.NotContains(t, reply.Error.Message, "PostgreSQL", tc.name)
	}
	rejected := map[string]events.Event{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateRejected {
			rejected[ev.JobID] = ev
		}
		return len(rejected) == len(cases)
	})
	require.Equal(t, fairway.CodeInvalid, rejected["nul-args"].Code)
	require.Equal(t, "args", rejected["nul-args"].Field)
	require.Equal(t, "subject", rejected["utf8-subject"].Field)

	// The asynchronous path: the same bodies published to JetStream.
	js, err := h.nc.JetStream()
	require.NoError(t, err)
	for _, tc := range cases {
		body := bytes.Replace([]byte(tc.body), []byte(`"id":"`), []byte(`"id":"async-`), 1)
		_, err := js.Publish("fairway.submit.g.echo", body)
		require.NoError(t, err)
	}
	_, err = js.Publish("fairway.submit.g.echo", []byte(`{"id":"async-good"}`))
	require.NoError(t, err)
	rejected = map[string]events.Event{}
	goodStored := false
	// The good one may be stored in a later batch than the rejections.
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateRejected {
			rejected[ev.JobID] = ev
		}
		goodStored = goodStored || ev.JobID == "async-good" && ev.State == fairway.StateWaiting
		return len(rejected) == len(cases) && goodStored
	})
	for _, tc := range cases {
		var id string
		require.NoError(t, json.Unmarshal([]byte(bytes.ToValidUTF8([]byte(tc.body), nil)), &struct {
			ID *string `json:"id"`
		}{&id}))
		ev := rejected["async-"+id]
		require.Equal(t, fairway.CodeInvalid, ev.Code, "%s: %+v", tc.name, ev)
		require.Equal(t, tc.field, ev.Field, tc.name)
		require.Contains(t, ev.Error, tc.message, tc.name)
	}
	job, err := h.client.Get(t.Context(), "g", "async-good")
	require.NoError(t, err, "the valid submission among the bad ones is stored")
	require.Equal(t, fairway.StateWaiting, job.State)

	// Other verbs: a job id with a NUL is an invalid id, not a PostgreSQL error.
	for _, verb := range []string{"get", "cancel", "logs"} {
		reply := request(t, h.nc, "fairway.api.g."+verb, []byte(`{"id":"a\u0000"}`))
		require.NotNil(t, reply.Error, verb)
		require.Equal(t, fairway.CodeInvalid, reply.Error.Code, "%s: %+v", verb, reply.Error)
		require.Equal(t, "id", reply.Error.Field, verb)
	}
	reply := request(t, h.nc, "fairway.api.g.list", []byte("{\"task\":\"\xff\"}"))
	require.NotNil(t, reply.Error)
	require.Equal(t, fairway.CodeInvalid, reply.Error.Code, "%+v", reply.Error)
	require.Equal(t, "task", reply.Error.Field)
}

// lockedBuffer is a bytes.Buffer a logger and a test can share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An internal error reaches the tenant as "internal" with a request id and
// none of its text; the text is in the coordinator's log under that id.
func TestInternalErrorsCarryOnlyARequestID(t *testing.T) {
	t.Parallel()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	var logs lockedBuffer
	coord, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)
	reply := request(t, nc, "fairway.api.g.get", []byte(`{"id":"x"}`))
	require.NotNil(t, reply.Error)
	require.Equal(t, fairway.CodeNotFound, reply.Error.Code, "a store that works answers not_found")

	st.Close() // every query fails from now on: "closed pool"
	reply = request(t, nc, "fairway.api.g.get", []byte(`{"id":"x"}`))
	require.NotNil(t, reply.Error)
	e := reply.Error
	require.Contains(t, []fairway.Code{fairway.CodeInternal, fairway.CodeUnavailable}, e.Code, "%+v", e)
	require.NotEmpty(t, e.RequestID)
	require.Regexp(t, `^(internal error|temporarily unavailable: try again); request id `+e.RequestID+`$`, e.Message)
	require.Empty(t, e.Field)
	require.Empty(t, e.JobID)

	// The detail is logged under the request id, before the reply is
	// sent: at error level when internal; at warning level when
	// unavailable (the journal's leader, finding its pool closed, took
	// its database for unreachable and answers so).
	var line map[string]any
	for _, l := range bytes.Split([]byte(logs.String()), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["request_id"] == e.RequestID {
			line = m
		}
	}
	require.NotNil(t, line, "no log line with request_id %s in:\n%s", e.RequestID, logs.String())
	if e.Code == fairway.CodeInternal {
		require.Equal(t, "ERROR", line["level"])
		require.Contains(t, line["error"], "closed pool")
	} else {
		require.Equal(t, "WARN", line["level"])
		require.NotEmpty(t, line["error"])
	}
	require.Equal(t, "fairway.api.g.get", line["subject"])
}

// An executor's report whose error or result holds text PostgreSQL refuses
// (a NUL, bytes that are not UTF-8) is stored with U+FFFD in their place,
// rather than refused with the whole batch of reports again and again.
func TestReportWithTextPostgreSQLRefusesIsStored(t *testing.T) {
	t.Parallel()
	h := setup(t)
	registerRaw(t, h, "i")
	ok := submit(t, h, fairway.Submission{Group: "g", Task: "echo"})
	failed := submit(t, h, fairway.Submission{Group: "g", Task: "echo", MaxRetries: new(int)})
	h.stored(2)
	reply, _ := dispatchRequest(t, h, 0)
	require.Nil(t, reply.Error)
	require.Len(t, reply.Jobs, 2)
	attempt := map[string]int{}
	for _, j := range reply.Jobs {
		attempt[j.ID] = j.Attempt
	}
	js, err := h.nc.JetStream()
	require.NoError(t, err)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	body := fmt.Sprintf(`[{"type":"done","group":"g","instance":"i","job_id":%q,"attempt":%d,"executor":"raw","time":%q,"outcome":"success","result":{"a":"x\u0000","\u0000":"\ud800"}},
		{"type":"done","group":"g","instance":"i","job_id":%q,"attempt":%d,"executor":"raw","time":%q,"outcome":"permanent","error":"boom\u0000 caf`+"\xe9"+`"}]`,
		ok, attempt[ok], now, failed, attempt[failed], now)
	_, err = js.Publish("fairway.results.raw", []byte(body))
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, lastState(h.final(ok)))
	job, err := h.client.Get(t.Context(), "g", ok)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"x\ufffd","\ufffd":"\ufffd"}`, string(job.Result))
	evs := h.final(failed)
	require.Equal(t, fairway.StateFailed, lastState(evs))
	require.Equal(t, "boom\ufffd caf\ufffd", evs[len(evs)-1].Error)
}

func lastState(evs []events.Event) fairway.State { return evs[len(evs)-1].State }
