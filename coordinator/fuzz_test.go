package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// fuzzDecode fuzzes decode, the coordinator's decoder of untrusted request
// bodies, into a T. Properties: no panic; a refusal is an invalid error
// naming a field; an accepted body holds only text PostgreSQL can store
// (texts lists it), and encoding it gives a body that is accepted again and
// encodes the same.
func fuzzDecode[T any](f *testing.F, seeds []string, texts func(T) []string) {
	for _, seed := range append(seeds, ``, `{}`, `null`, `[]`, `"x"`, `{`, `{"\u0000":1}`, "{\"\xff\":1}", `{"unknown":"\u0000"}`) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v T
		if err := decode(data, &v); err != nil {
			var fe *fairway.Error
			if !errors.As(err, &fe) || fe.Code != fairway.CodeInvalid || fe.Field == "" {
				t.Fatalf("refusal %v is not an invalid error naming a field", err)
			}
			return
		}
		for _, s := range texts(v) {
			if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
				t.Fatalf("accepted %q, which PostgreSQL cannot store, from %q", s, data)
			}
		}
		encoded, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encoding an accepted body: %v", err)
		}
		var again T
		if err := decode(encoded, &again); err != nil {
			t.Fatalf("re-encoded body %s refused: %v", encoded, err)
		}
		if encodedAgain, _ := json.Marshal(again); !bytes.Equal(encoded, encodedAgain) {
			t.Fatalf("round trip changed the body:\n%s\n%s", encoded, encodedAgain)
		}
	})
}

// FuzzDecodeJobRequest: the body of get, cancel, logs, release, priority.
func FuzzDecodeJobRequest(f *testing.F) {
	fuzzDecode(f, []string{`{"id":"01933b6e-0000-7000-8000-000000000000"}`, `{"id":"j","priority":"high"}`, `{"id":"a\u0000"}`, "{\"id\":\"\xc3\"}", `{"id":1}`},
		func(r events.JobRequest) []string { return []string{r.ID, string(r.Priority)} })
}

// FuzzDecodeListRequest: the body of list.
func FuzzDecodeListRequest(f *testing.F) {
	fuzzDecode(f, []string{`{"task":"echo","state":"waiting","limit":10,"group":"acme"}`, `{"task":"\u0000"}`, "{\"state\":\"\xff\"}", `{"limit":-1}`, `{"limit":1e99}`},
		func(r events.ListRequest) []string { return []string{r.Group, r.Task, string(r.State)} })
}

// FuzzDecodeRegisterRequest: an executor's registration.
func FuzzDecodeRegisterRequest(f *testing.F) {
	fuzzDecode(f, []string{`{"executor":{"app_id":"ex","instance":"i","host":"h","slots":4,"tasks":["echo","sleep"]}}`,
		`{"executor":{"app_id":"ex","tasks":["e\u0000"]}}`, "{\"executor\":{\"host\":\"\xfe\"}}", `{"executor":{"started":"2026-11-22T10:00:00Z"}}`},
		func(r events.RegisterRequest) []string {
			return append([]string{r.Executor.AppID, r.Executor.Instance, r.Executor.Host}, r.Executor.Tasks...)
		})
}

// FuzzDecodeDispatchRequest: an executor asking for jobs.
func FuzzDecodeDispatchRequest(f *testing.F) {
	fuzzDecode(f, []string{`{"executor":"ex","instance":"i","slots":4,"tasks":["echo"],"wait_ms":3000,"request_id":"r1"}`,
		`{"executor":"ex","request_id":"\u0000"}`, "{\"tasks\":[\"\xff\"]}", `{"slots":-5}`, `{"wait_ms":1e10}`},
		func(r events.DispatchRequest) []string {
			return append([]string{r.Executor, r.Instance, r.RequestID}, r.Tasks...)
		})
}

// FuzzDecodeHeartbeat: an executor's heartbeat.
func FuzzDecodeHeartbeat(f *testing.F) {
	fuzzDecode(f, []string{`{"executor":"ex","instance":"i","jobs":[{"group":"g","id":"j1"},{"group":"g","id":"j2"}],"slots":4}`,
		`{"jobs":[{"group":"\u0000","id":"j"}]}`, "{\"instance\":\"\xed\xa0\x80\"}"},
		func(h events.Heartbeat) []string {
			text := []string{h.Executor, h.Instance}
			for _, j := range h.Jobs {
				text = append(text, j.Group, j.ID)
			}
			return text
		})
}
