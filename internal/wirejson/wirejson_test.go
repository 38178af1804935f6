package wirejson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 11, 25, 23, 0, 0, 123456789, time.FixedZone("x", 3600))

func reports(n int) []events.Report {
	rs := make([]events.Report, n)
	for i := range rs {
		started := now.Add(-time.Second)
		rs[i] = events.Report{Type: "done", Group: fmt.Sprintf("g%d", i%10), JobID: fmt.Sprintf("01a21475-7705-709d-86a3-%012d", i), Attempt: 1 + i%3,
			Executor: "bench-1", Instance: "inst", Time: now, Outcome: fairway.OutcomeSuccess, Result: json.RawMessage(`{"n":[1,2,{"x":null}]}`),
			Error: "line 1\n\t\"quoted\" <b> & \u2028 é", Snooze: "30s", Started: &started,
			Logs: []fairway.LogLine{{JobID: "j", Attempt: 1, Time: now, Level: "info", Message: "hello"}}}
	}
	return rs
}

func jobs(n int) []fairway.Job {
	js := make([]fairway.Job, n)
	for i := range js {
		lease := now.Add(time.Minute)
		js[i] = fairway.Job{ID: fmt.Sprintf("01a21475-7705-709d-86a3-%012d", i), Task: "work", Group: fmt.Sprintf("g%d", i%10),
			Args: json.RawMessage(`{"n":1,"s":"a\"b"}`), Priority: fairway.PriorityLow, State: fairway.StateScheduled, MaxRetries: 5, Attempt: 1,
			RunAt: now, Submitted: now, Executor: "bench-1", LeaseUntil: &lease, DependsOn: []string{"a", "b"}, Timeout: "5s"}
	}
	return js
}

// TestWireTypesRoundTripAsEncodingJSON: on every wire type the package
// carries, its encoding decodes with encoding/json to the same value, and
// encoding/json's encoding decodes with it to the same value.
func TestWireTypesRoundTripAsEncodingJSON(t *testing.T) {
	for name, v := range map[string]any{
		"reports":        reports(3),
		"dispatch reply": events.DispatchReply{Jobs: jobs(3)},
		"error reply":    events.DispatchReply{Error: fairway.Invalid("slots", "must be at least 1")},
		"events": []events.Event{{ID: "1.0", JobID: "j", Task: "t", Group: "g", State: fairway.StateSuccess, PreviousState: fairway.StateRunning,
			Attempt: 2, Error: "boom\x01", Executor: "e", Time: now}},
	} {
		t.Run(name, func(t *testing.T) {
			ours, err := wirejson.Marshal(v)
			require.NoError(t, err)
			std, err := json.Marshal(v)
			require.NoError(t, err)
			require.JSONEq(t, string(std), string(ours))

			viaStd := reflect.New(reflect.TypeOf(v))
			require.NoError(t, json.Unmarshal(ours, viaStd.Interface()))
			viaOurs := reflect.New(reflect.TypeOf(v))
			require.NoError(t, wirejson.Unmarshal(std, viaOurs.Interface()))
			require.Equal(t, viaStd.Elem().Interface(), viaOurs.Elem().Interface())
		})
	}
}

// FuzzUnmarshal: on any input, decoding a batch of reports, a dispatch
// reply or a batch of events succeeds exactly when encoding/json's does,
// with the same value.
func FuzzUnmarshal(f *testing.F) {
	for _, v := range []any{reports(2), events.DispatchReply{Jobs: jobs(2)}, []events.Event{{ID: "1", Time: now}}} {
		data, err := json.Marshal(v)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, s := range []string{`[{"type":"done","attempt":1.5}]`, `{"jobs":[{"args":{"a":1}}]}  `, `[{"job_id":"a\ud800b","time":"x"}]`,
		`[{"JOB_ID":"case"}]`, `{"jobs":null,"error":{"code":"invalid"}}`, `[{"logs":[{"level":1}]}]`, `[] x`, `"\xff"`, `[{"attempt":1e400}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range []reflect.Type{reflect.TypeFor[[]events.Report](), reflect.TypeFor[events.DispatchReply](), reflect.TypeFor[[]events.Event]()} {
			std, ours := reflect.New(typ), reflect.New(typ)
			errStd := json.Unmarshal(data, std.Interface())
			errOurs := wirejson.Unmarshal(data, ours.Interface())
			if (errStd == nil) != (errOurs == nil) {
				t.Fatalf("%s: encoding/json: %v; wirejson: %v", typ, errStd, errOurs)
			}
			if errStd == nil && !reflect.DeepEqual(std.Elem().Interface(), ours.Elem().Interface()) {
				t.Fatalf("%s: encoding/json decoded %+v; wirejson %+v", typ, std.Elem().Interface(), ours.Elem().Interface())
			}
		}
	})
}

// BenchmarkWire: decoding a batch of 100 reports and a dispatch reply of
// 100 jobs, and encoding that reply, with each codec.
func BenchmarkWire(b *testing.B) {
	reportData, _ := json.Marshal(reports(100))
	reply := events.DispatchReply{Jobs: jobs(100)}
	replyData, _ := json.Marshal(reply)
	for _, c := range []struct {
		name      string
		unmarshal func([]byte, any) error
		marshal   func(any) ([]byte, error)
	}{{"encoding-json", json.Unmarshal, json.Marshal}, {"wirejson", wirejson.Unmarshal, wirejson.Marshal}} {
		b.Run("decode-reports/"+c.name, func(b *testing.B) {
			for b.Loop() {
				var rs []events.Report
				if err := c.unmarshal(reportData, &rs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("decode-jobs/"+c.name, func(b *testing.B) {
			for b.Loop() {
				var r events.DispatchReply
				if err := c.unmarshal(replyData, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encode-jobs/"+c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.marshal(reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// stdStrict decodes data as fairway.DecodeSubmission's encoding/json
// path does: one value, unknown fields refused, nothing but spaces after.
func stdStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

// FuzzUnmarshalStrict: whatever UnmarshalStrict accepts as a submission
// without a time, encoding/json's strict decoding accepts too, with the
// same value (the other way round does not matter: DecodeSubmission
// decodes again with encoding/json whatever the fast decoder refuses, and
// every body with a time: the fast decoder's times are lenient, it took
// "0000-01-01T00:00;00Z").
func FuzzUnmarshalStrict(f *testing.F) {
	for _, s := range []string{`{}`, `{"task":"echo","args":{"a": [1, 2.5, "x"]},"priority":"high","max_retries":3,"unique_by":["a"]}`,
		`{"run_at":"2030-01-01T00:00:00Z","expires_at":"2099-01-01T00:00:00+02:00","pending":true}`, `{"TraceParent":"x"}`,
		`{"Task":"t"}`, `{"task":"a","task":"b"}`, `{"args":null}`, `{"max_retries":1.0}`, `{"max_retries":null}`, `{"id":"a\u0000"}`,
		`{"unknown":1}`, `{} {}`, `{}]`, `{"args":{"a":"\ud800"}}`, "{\"subject\":\"caf\xe9\"}", `{"run_at":"2030-01-01"}`,
		`{"depends_on":[]}`, `{"args":1e400}`, `{"priority":1}`, `{"run_At":"0000-01-01T00:00;00Z"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast fairway.Submission
		if wirejson.UnmarshalStrict(data, &fast) != nil || fast.RunAt != nil || fast.TriggerAfter != nil || fast.ExpiresAt != nil {
			return // decoded again by encoding/json (DecodeSubmission)
		}
		var std fairway.Submission
		if err := stdStrict(data, &std); err != nil {
			t.Fatalf("wirejson accepted %q, encoding/json refuses it: %v", data, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q: wirejson decoded %+v; encoding/json %+v", data, fast, std)
		}
	})
}

// BenchmarkDecodeSubmission: a typical submission body through
// fairway.DecodeSubmission (the fast path), and through the encoding/json
// path alone (what it cost before).
func BenchmarkDecodeSubmission(b *testing.B) {
	body := []byte(`{"id":"invoice-2026-0042","task":"send-mail","args":{"to":"a@example.com","template":"welcome","n":3},"priority":"high","tracker":"user-17","max_retries":5}`)
	b.Run("DecodeSubmission", func(b *testing.B) {
		for b.Loop() {
			if _, err := fairway.DecodeSubmission(body, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var s fairway.Submission
			if err := stdStrict(body, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
