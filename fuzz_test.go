package fairway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
)

// storable fails t if s holds what PostgreSQL's text columns refuse.
func storable(t *testing.T, field, s string) {
	t.Helper()
	if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		t.Fatalf("accepted %s %q, which PostgreSQL cannot store", field, s)
	}
}

// FuzzDecodeSubmission decodes and normalises untrusted submission bodies,
// as the coordinator does. Properties: no panic; a refusal is an invalid
// error naming a field; an accepted submission holds only text PostgreSQL
// can store, and encoding it gives a body that is accepted again and
// encodes the same.
func FuzzDecodeSubmission(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"task":"echo","args":{"hello":"world"},"priority":"high","tracker":"invoice-7","subject":"Echo","submitter":"alice","max_retries":3}`,
		`{"id":"01933b6e-0000-7000-8000-000000000000","group":"g","task":"t","run_at":"2030-01-01T00:00:00Z"}`,
		`{"run_in":"90s","expires_at":"2099-01-01T00:00:00+02:00"}`,
		`{"pending":true,"trigger_after":"2030-01-01T00:00:00Z"}`,
		`{"args":{"nul":"\u0000"}}`,
		`{"args":{"\u0000":1}}`,
		`{"args":{"a":"\ud800"}}`,
		`{"args":{"a":"\ud83d\ude00","b":"C:\\u0000"}}`,
		"{\"subject\":\"caf\xe9\"}",
		"{\"args\":{\"a\":\"\xff\"}}",
		`{"subject":"a\u0000b"}`,
		`{"args":[1]}`, `{"args":null}`, `{"args":{"n":1e400}}`,
		`{"max_retries":-1}`, `{"max_retries":1e3}`, `{"run_in":"-5m"}`,
		`{"run_at":"10000-01-01T00:00:00Z"}`, `{"run_at":"0000-01-01T00:00:00-23:59"}`,
		`{"task":"a.b"}`, `{"group":"*"}`, `{} {}`, `[`, ``, `null`, `"x"`,
		`{"args":{"deep":[[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]}}`,
	} {
		f.Add([]byte(seed))
	}
	const maxArgs = 4 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		sub, err := fairway.DecodeSubmission(data, maxArgs)
		if err == nil {
			err = sub.Normalize("g", "t", maxArgs, 5)
		}
		if err != nil {
			refusedNamingAField(t, err)
			return
		}
		for field, v := range map[string]string{"id": sub.ID, "task": sub.Task, "group": sub.Group, "subject": sub.Subject,
			"submitter": sub.Submitter, "tracker": sub.Tracker, "priority": string(sub.Priority)} {
			storable(t, field, v)
		}
		if !json.Valid(sub.Args) || fairway.CheckJSONText(sub.Args) != nil {
			t.Fatalf("accepted args %q, which PostgreSQL's jsonb refuses", sub.Args)
		}
		encoded, err := json.Marshal(sub)
		if err != nil {
			t.Fatalf("encoding an accepted submission: %v", err)
		}
		again, err := fairway.DecodeSubmission(encoded, maxArgs)
		if err == nil {
			err = again.Normalize("g", "t", maxArgs, 5)
		}
		if err != nil {
			t.Fatalf("re-encoded submission %s refused: %v", encoded, err)
		}
		if encodedAgain, _ := json.Marshal(again); !bytes.Equal(encoded, encodedAgain) {
			t.Fatalf("round trip changed the submission:\n%s\n%s", encoded, encodedAgain)
		}
	})
}

// refusedNamingAField fails unless err is an invalid error naming a
// field that PostgreSQL can store.
func refusedNamingAField(t *testing.T, err error) {
	t.Helper()
	var fe *fairway.Error
	if !errors.As(err, &fe) || fe.Code != fairway.CodeInvalid || fe.Field == "" {
		t.Fatalf("refusal %v is not an invalid error naming a field", err)
	}
	storable(t, "error field", fe.Field)
}

// FuzzCleanJSON: whatever an executor reports as a result is made storable
// without losing valid JSON.
func FuzzCleanJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":"\u0000"}`, `{"\u0000":"\ud800"}`, "[\"\xff\"]", `"\udc00x"`, `{"a":"\\u0000"}`, `1e400`, `nul`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := fairway.CleanJSON(data)
		if !json.Valid(data) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("CleanJSON(%q) = %q is not JSON", data, out)
		}
		if err := fairway.CheckJSONText(out); err != nil {
			t.Fatalf("CleanJSON(%q) = %q: %v", data, out, err)
		}
	})
}

// FuzzDecodeWorkflow: a workflow body is refused with an invalid error
// naming a field, or accepted as jobs in an order where each comes after
// every job of the workflow it depends on, with storable ids.
func FuzzDecodeWorkflow(f *testing.F) {
	for _, seed := range []string{
		`{"jobs":[{"ref":"a","task":"t"},{"ref":"b","task":"t","depends_on":["a"]}]}`,
		`{"jobs":[{"ref":"a","task":"t","depends_on":["b"]},{"ref":"b","task":"t","depends_on":["a"]}]}`,
		`{"jobs":[{"ref":"a","task":"t","depends_on":["a"]}]}`,
		`{"jobs":[{"id":"x","task":"t"},{"task":"t","depends_on":["x","stored"]}]}`,
		`{"jobs":[{"ref":"a","task":"t"},{"ref":"a","task":"t"}]}`,
		`{"jobs":[{"ref":"\u0000","task":"t"}]}`, `{"jobs":[3]}`, `{"jobs":[]}`, `{"jobs":null}`, `{}`, `[`,
		`{"jobs":[{"task":"t","pending":true,"depends_on":["x"]}]}`,
	} {
		f.Add([]byte(seed))
	}
	const maxArgs = 4 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := fairway.DecodeWorkflow(data, maxArgs)
		var subs []fairway.Submission
		if err == nil {
			subs, err = w.Normalize("g", maxArgs, 5)
		}
		if err != nil {
			refusedNamingAField(t, err)
			return
		}
		at := map[string]int{}
		for i, s := range subs {
			storable(t, "id", s.ID)
			at[s.ID] = i
		}
		for i, s := range subs {
			for _, d := range s.DependsOn {
				storable(t, "depends_on", d)
				if j, ok := at[d]; ok && j >= i {
					t.Fatalf("job %s comes before its dependency %s", s.ID, d)
				}
			}
		}
	})
}
