package fairway_test

import (
	"time"

	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

func TestSubmissionValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, group, task string
		maxArgs                 int64
		field, message          string
	}{
		{"valid", `{"args":{"a":1}}`, "g", "t", 100, "", ""},
		{"task from body", `{"task":"t"}`, "g", "", 100, "", ""},
		{"missing group", `{"task":"t"}`, "", "", 100, "group", "missing"},
		{"missing task", `{}`, "g", "", 100, "task", "missing"},
		{"group not a token", `{"group":"a b","task":"t"}`, "", "", 100, "group", `contains ' '`},
		{"task with a wildcard", `{}`, "g", "*", 100, "task", `contains '*'`},
		{"group too long", `{}`, strings.Repeat("g", 65), "t", 100, "group", "longer than 64"},
		{"group differs", `{"group":"h"}`, "g", "t", 100, "group", `body names group "h" but the subject names "g"`},
		{"task differs", `{"task":"u"}`, "g", "t", 100, "task", `body names task "u"`},
		{"priority", `{"priority":"HIGH"}`, "g", "t", 100, "priority", `unknown priority "HIGH"`},
		{"args array", `{"args":[1]}`, "g", "t", 100, "args", "not an array"},
		{"args string", `{"args":"x"}`, "g", "t", 100, "args", "not a string"},
		{"args null", `{"args":null}`, "g", "t", 100, "args", "not null"},
		{"args too large", `{"args":{"a":"` + strings.Repeat("x", 100) + `"}}`, "g", "t", 100, "args", "exceeds the limit of 100 bytes"},
		{"body far too large", `{"args":{"a":"` + strings.Repeat("x", 70<<10) + `"}}`, "g", "t", 100, "args", "exceeds the limit"},
		{"unknown field", `{"prio":"high"}`, "g", "t", 100, "prio", "unknown field"},
		{"wrong type", `{"max_retries":"3"}`, "g", "t", 100, "max_retries", "must be a whole number"},
		{"retries out of range", `{"max_retries":101}`, "g", "t", 100, "max_retries", "not in 0..100"},
		{"negative retries", `{"max_retries":-1}`, "g", "t", 100, "max_retries", "not in 0..100"},
		{"bad run_at", `{"run_at":"tomorrow"}`, "g", "t", 100, "run_at", "RFC 3339"},
		{"bad expires_at", `{"expires_at":"soon"}`, "g", "t", 100, "expires_at", "RFC 3339"},
		{"bad trigger_after", `{"pending":true,"trigger_after":"2026-13-01T00:00:00Z"}`, "g", "t", 100, "trigger_after", "RFC 3339"},
		{"bad run_in", `{"run_in":"10 minutes"}`, "g", "t", 100, "run_in", `"10 minutes" is not a duration`},
		{"negative run_in", `{"run_in":"-5m"}`, "g", "t", 100, "run_in", "is not in 0s.."},
		{"valid timeout", `{"timeout":"90s"}`, "g", "t", 100, "", ""},
		{"bad timeout", `{"timeout":"a minute"}`, "g", "t", 100, "timeout", `"a minute" is not a duration`},
		{"timeout too short", `{"timeout":"500ms"}`, "g", "t", 100, "timeout", "is not in 1s..168h0m0s"},
		{"timeout too long", `{"timeout":"200h"}`, "g", "t", 100, "timeout", "is not in 1s..168h0m0s"},
		{"timeout a number", `{"timeout":30}`, "g", "t", 100, "timeout", ""},
		{"run_in and run_at", `{"run_in":"5m","run_at":"2030-01-01T00:00:00Z"}`, "g", "t", 100, "run_in", "not both"},
		{"trigger_after and run_at", `{"trigger_after":"2030-01-01T00:00:00Z","run_at":"2030-01-01T00:00:00Z"}`, "g", "t", 100, "trigger_after", "not both"},
		{"expires before it may run", `{"run_at":"2030-01-02T00:00:00Z","expires_at":"2030-01-01T00:00:00Z"}`, "g", "t", 100, "expires_at", "could never run"},
		{"not an object", `[1]`, "g", "t", 100, "body", "must be a JSON object"},
		{"empty", ``, "g", "t", 100, "body", "empty body"},
		{"truncated", `{"args":`, "g", "t", 100, "body", "ends too early"},
		{"trailing data", `{} {}`, "g", "t", 100, "body", "unexpected data"},
		{"bad id", `{"id":"a b"}`, "g", "t", 100, "id", `contains ' '`},
		{"subject too long", `{"subject":"` + strings.Repeat("s", 513) + `"}`, "g", "t", 100, "subject", "exceeds the limit of 512"},
		// What PostgreSQL's text and jsonb refuse never reaches it.
		{"NUL in args", `{"args":{"a":{"b":"x\u0000"}}}`, "g", "t", 100, "args", `args.a.b contains a NUL character (\u0000)`},
		{"NUL in an args array", `{"args":{"l":[1,{"m":"\u0000"}]}}`, "g", "t", 100, "args", `args.l[1].m contains a NUL`},
		{"NUL in an args key", `{"args":{"a":{"\u0000":1}}}`, "g", "t", 100, "args", `args.a has a key that contains a NUL`},
		{"NUL in an odd args key", `{"args":{"a b":{"c":"\u0000"}}}`, "g", "t", 100, "args", `args["a b"].c contains a NUL`},
		{"invalid UTF-8 in args", "{\"args\":{\"a\":\"\xff\"}}", "g", "t", 100, "args", "args.a is not valid UTF-8"},
		{"half a surrogate pair in args", `{"args":{"a":"\ud800x"}}`, "g", "t", 100, "args", "surrogate"},
		{"low surrogate alone in args", `{"args":{"a":"\udc00"}}`, "g", "t", 100, "args", "surrogate"},
		{"surrogate pair in args", `{"args":{"a":"\ud83d\ude00"}}`, "g", "t", 100, "", ""},
		{"escaped backslash before u0000", `{"args":{"a":"C:\\u0000"}}`, "g", "t", 100, "", ""},
		{"NUL in subject", `{"subject":"a\u0000b"}`, "g", "t", 100, "subject", "contains a NUL character"},
		{"invalid UTF-8 in subject", "{\"subject\":\"a\xc3\"}", "g", "t", 100, "subject", "is not valid UTF-8"},
		{"NUL in submitter", `{"submitter":"\u0000"}`, "g", "t", 100, "submitter", "NUL"},
		{"invalid UTF-8 in tracker", "{\"tracker\":\"\xed\xa0\x80\"}", "g", "t", 100, "tracker", "not valid UTF-8"},
		{"NUL in id", `{"id":"a\u0000"}`, "g", "t", 100, "id", "NUL"},
		{"invalid UTF-8 in run_in", "{\"run_in\":\"5m\xff\"}", "g", "t", 100, "run_in", "not valid UTF-8"},
		{"unknown field with NUL", `{"x\u0000":1}`, "g", "t", 100, `x\x00`, "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sub, err := fairway.DecodeSubmission([]byte(tc.body), tc.maxArgs)
			if err == nil {
				err = sub.Normalize(tc.group, tc.task, tc.maxArgs, 5)
			}
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *fairway.Error
			require.True(t, errors.As(err, &fe), "got %v", err)
			require.ErrorIs(t, err, fairway.ErrInvalid)
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, fe.Message, tc.message)
		})
	}
}

func TestNormalizeRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	for _, sub := range []fairway.Submission{
		{Subject: "a\x00"},
		{Submitter: "\xff"},
		{Tracker: "t\x00"},
		{Args: json.RawMessage(`{"a":"\u0000"}`)},
		{Args: json.RawMessage("{\"a\":\"\xff\"}")},
	} {
		err := sub.Normalize("g", "t", 100, 0)
		require.ErrorIs(t, err, fairway.ErrInvalid, "%+v", sub)
	}
}

func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	require.NoError(t, fairway.CheckJSONText([]byte(`{"id":"é","n":[1,2]}`)))
	err := fairway.CheckJSONText([]byte(`{"tasks":["echo","\u0000"]}`))
	var fe *fairway.Error
	require.True(t, errors.As(err, &fe), "got %v", err)
	require.Equal(t, "tasks", fe.Field)
	require.Equal(t, `tasks[1] contains a NUL character (\u0000), which cannot be stored`, fe.Message)
	err = fairway.CheckJSONText([]byte(`{"ok":1,"\u0000":2}`))
	require.True(t, errors.As(err, &fe), "got %v", err)
	require.Equal(t, "body", fe.Field)
	require.Contains(t, fe.Message, "the body has a key that contains a NUL")
}

func TestNormalizeFillsDefaults(t *testing.T) {
	t.Parallel()
	var sub fairway.Submission
	require.NoError(t, sub.Normalize("g", "t", 100, 7))
	require.Equal(t, "g", sub.Group)
	require.Equal(t, "t", sub.Task)
	require.Equal(t, fairway.PriorityLow, sub.Priority)
	require.Equal(t, 7, *sub.MaxRetries)
	require.JSONEq(t, `{}`, string(sub.Args))
	require.Len(t, sub.ID, 36)
}

func TestIDsAreTimeOrdered(t *testing.T) {
	t.Parallel()
	prev := fairway.NewID()
	for range 1000 {
		id := fairway.NewID()
		require.Greater(t, id, prev)
		prev = id
	}
}

func TestErrorsMatchByCode(t *testing.T) {
	t.Parallel()
	err := error(fairway.Duplicate("tr", "job-1"))
	require.ErrorIs(t, err, fairway.ErrDuplicate)
	require.NotErrorIs(t, err, fairway.ErrInvalid)
	data, _ := json.Marshal(err)
	require.JSONEq(t, `{"code":"duplicate","field":"tracker","message":"tracker \"tr\" is held by job job-1, which is not final yet","job_id":"job-1"}`, string(data))
	inner := errors.New("x")
	require.ErrorIs(t, fairway.Permanent(inner), inner)
	var perm *fairway.PermanentError
	require.ErrorAs(t, fmt.Errorf("wrapped: %w", fairway.Permanent(inner)), &perm)
	require.NoError(t, fairway.Permanent(nil))
}

func TestStates(t *testing.T) {
	t.Parallel()
	for _, s := range fairway.States {
		require.True(t, s.Valid())
		require.Equal(t, s == fairway.StateSuccess || s == fairway.StateFailed || s == fairway.StateCancelled, s.Final(), s)
	}
	require.False(t, fairway.StateRejected.Valid())
}

func TestRunInBecomesRunAt(t *testing.T) {
	before := time.Now()
	s := fairway.Submission{Group: "g", Task: "t", RunIn: "15m"}
	require.NoError(t, s.Normalize("", "", 100, 0))
	require.Empty(t, s.RunIn)
	require.NotNil(t, s.RunAt)
	require.WithinRange(t, *s.RunAt, before.Add(15*time.Minute), time.Now().Add(15*time.Minute))
	require.False(t, s.Held())
	s = fairway.Submission{Group: "g", Task: "t", Pending: true}
	require.NoError(t, s.Normalize("", "", 100, 0))
	require.True(t, s.Held())
}

func TestArgsNumberOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{`{"x":1e1000000}`, false},
		{`{"x":1e131071}`, true},
		{`{"x":1e131072}`, false},
		{`{"x":-1E+131072}`, false},
		{`{"x":1e-16383}`, true},
		{`{"x":1e-16384}`, false},
		{`{"x":0e99999999}`, true},
		{`{"x":0e9999999999}`, false},
		{`{"x":12345678901234567890.5}`, true},
		{`{"s":"1e1000000","y":[1,2,{"z":1e1000000}]}`, false},
	} {
		sub := fairway.Submission{Args: json.RawMessage(tc.args)}
		err := sub.Normalize("g", "t", 1<<20, 1)
		if tc.ok {
			require.NoError(t, err, tc.args)
			continue
		}
		require.ErrorIs(t, err, fairway.ErrInvalid, tc.args)
		require.Contains(t, err.Error(), "number out of range", tc.args)
	}
	sub := fairway.Submission{Args: json.RawMessage(`{"a":{"b":[0,1e1000000]}}`)}
	require.EqualError(t, sub.Normalize("g", "t", 1<<20, 1), "args: args.a.b[1] "+`is a number out of range (PostgreSQL stores at most 131072 digits before the decimal point and 16383 after it)`)
}

func TestTruncate(t *testing.T) {
	require.Equal(t, "abc", fairway.TruncateRunes("abc", 128))
	long := strings.Repeat("é", 300)
	got := fairway.TruncateRunes(long, 128)
	require.Equal(t, 128, utf8.RuneCountInString(got))
	require.True(t, strings.HasSuffix(got, "[truncated]"))
	got = fairway.TruncateBytes(strings.Repeat("é\x00", 5000), fairway.MaxErrorTextSize)
	require.LessOrEqual(t, len(got), fairway.MaxErrorTextSize)
	require.True(t, utf8.ValidString(got))
	require.NotContains(t, got, "\x00")
}

// TestCleanJSONMakesResultsStorable: an executor's result is stored, not
// refused: text PostgreSQL cannot hold is replaced, and a number its
// numeric type cannot hold becomes a string of its digits.
func TestCleanJSONMakesResultsStorable(t *testing.T) {
	for in, want := range map[string]string{
		`{"n":1e170000,"m":2}`:    `{"m":2,"n":"1e170000"}`,
		`[1e-20000, 1.5]`:         `["1e-20000",1.5]`,
		`{"a":"x\u0000y"}`:        `{"a":"x\ufffdy"}`,
		`{"ok":[1,2,"three"]}`:    `{"ok":[1,2,"three"]}`,
		`{"big":1e400,"n":12345}`: `{"big":1e400,"n":12345}`, // fits numeric: kept as it is
	} {
		out := fairway.CleanJSON([]byte(in))
		if in == want {
			require.Equal(t, want, string(out))
		} else {
			require.JSONEq(t, want, string(out), in)
		}
		require.NoError(t, fairway.CheckJSONText(out), in)
	}
}

// TestDecodeSubmissionRefusesALenientTime: a time that is not RFC 3339
// ("00:00;00Z", which the fast decoder took) is refused, naming its field.
func TestDecodeSubmissionRefusesALenientTime(t *testing.T) {
	_, err := fairway.DecodeSubmission([]byte(`{"run_at":"2030-01-01T00:00;00Z"}`), 1<<20)
	require.ErrorIs(t, err, fairway.ErrInvalid)
	require.Equal(t, "run_at", fairway.AsError(err).Field)
}
