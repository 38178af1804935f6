package events_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// FuzzDecodeReports decodes untrusted executor reports, as the coordinator
// does. Properties: no panic; accepted reports hold only text PostgreSQL
// can store (text columns and the jsonb result), and encoding them gives a
// message that decodes to the same reports.
func FuzzDecodeReports(f *testing.F) {
	for _, seed := range []string{
		`{"type":"started","job_id":"j","attempt":1,"executor":"ex","time":"2026-11-22T10:00:00Z"}`,
		`[{"type":"progress","job_id":"j","attempt":1,"executor":"ex","time":"2026-11-22T10:00:00Z","progress":50},
		  {"type":"log","job_id":"j","attempt":1,"executor":"ex","logs":[{"job_id":"j","attempt":1,"level":"info","message":"hi"}]},
		  {"type":"done","job_id":"j","attempt":1,"executor":"ex","outcome":"success","result":{"w":100}}]`,
		`{"type":"done","outcome":"error","error":"boom\u0000","result":{"\u0000":"\ud800"}}`,
		"{\"type\":\"done\",\"error\":\"caf\xe9\",\"result\":[\"\xff\"]}",
		`{"type":"log","logs":[{"message":"a\u0000b","level":"\udc00"}]}`,
		`{"result":"\\u0000"}`, `{"result":1e400}`, `{"time":"10000-01-01T00:00:00Z"}`,
		`[]`, `[1]`, `null`, `[null]`, ``, `[`, `{"attempt":1e3}`, ` [ {} ] `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reports, err := events.DecodeReports(data)
		if err != nil {
			return
		}
		for _, r := range reports {
			texts := []string{r.Type, r.JobID, r.Executor, string(r.Outcome), r.Error}
			for _, l := range r.Logs {
				texts = append(texts, l.JobID, l.Level, l.Message)
			}
			for _, s := range texts {
				if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
					t.Fatalf("decoded %q, which PostgreSQL cannot store, from %q", s, data)
				}
			}
			if len(r.Result) > 0 && (!json.Valid(r.Result) || fairway.CheckJSONText(r.Result) != nil) {
				t.Fatalf("decoded result %q, which PostgreSQL's jsonb refuses, from %q", r.Result, data)
			}
		}
		encoded, err := json.Marshal(reports)
		if err != nil {
			t.Fatalf("encoding decoded reports: %v", err)
		}
		again, err := events.DecodeReports(encoded)
		if err != nil {
			t.Fatalf("re-encoded reports %s refused: %v", encoded, err)
		}
		if encodedAgain, _ := json.Marshal(again); !bytes.Equal(encoded, encodedAgain) {
			t.Fatalf("round trip changed the reports:\n%s\n%s", encoded, encodedAgain)
		}
	})
}
