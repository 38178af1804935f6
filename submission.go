package fairway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/google/uuid"
)

// Limits on the sizes of a submission's text fields.
const (
	MaxNameLength      = 64  // group and task names
	MaxIDLength        = 128 // client-supplied job ids
	MaxSubjectLength   = 512
	MaxSubmitterLength = 256
	MaxTrackerLength   = 256
	MaxRetriesLimit    = 100
	MaxDependencies    = 256 // ids in a job's depends_on
	// DefaultMaxArgsSize is the default limit on a job's args (1 MiB).
	DefaultMaxArgsSize = 1 << 20
)

// Submission is a request to create a job: the JSON body clients publish to
// fairway.submit.<group>.<task> or send to fairway.api.<group>.submit.
type Submission struct {
	// ID makes the submit idempotent: a job id submitted twice creates one
	// job. Generated (UUIDv7, time-ordered) when empty.
	ID string `json:"id,omitempty"`
	// Task names the code to run. Optional in the body when the subject
	// names it; must match the subject when both do.
	Task string `json:"task,omitempty"`
	// Group is the tenant the job is fair to. Same rule as Task.
	Group string `json:"group,omitempty"`
	// Args is the task's input: a JSON object. Defaults to {}.
	Args json.RawMessage `json:"args,omitempty"`
	// Subject is a human description of the job.
	Subject string `json:"subject,omitempty"`
	// Submitter says who submitted the job.
	Submitter string `json:"submitter,omitempty"`
	// Priority is high or low. Defaults to low.
	Priority Priority `json:"priority,omitempty"`
	// Tracker is a de-duplication key: the submit is refused while a
	// non-final job with the same tracker exists.
	Tracker string `json:"tracker,omitempty"`
	// MaxRetries is how many times a failed job is retried. Defaults to the
	// coordinator's scheduler.retries.
	MaxRetries *int `json:"max_retries,omitempty"`
	// RunAt makes the job ineligible before this time.
	RunAt *time.Time `json:"run_at,omitempty"`
	// RunIn delays the job by a duration ("90s", "15m", "2h") counted from
	// when the coordinator stores it. Not together with RunAt.
	RunIn string `json:"run_in,omitempty"`
	// Pending holds the job: it does not run until it is released (fairway
	// jobs release ID), or until TriggerAfter.
	Pending bool `json:"pending,omitempty"`
	// TriggerAfter releases a pending job at this time; it implies Pending.
	TriggerAfter *time.Time `json:"trigger_after,omitempty"`
	// ExpiresAt fails the job with the error "expired" if it has not
	// started by then.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// UniqueBy makes the job unique within its group by these of its
	// fields: "task", "args", "subject" (any of them; the group always
	// counts). A submission is refused, naming the holder, while a job
	// with the same values is not final, as with a tracker (which is the
	// special case of a key of your own; give one or the other).
	UniqueBy []string `json:"unique_by,omitempty"`
	// UniqueFor adds a period to UniqueBy ("1h", "24h"): the values count
	// within one window of that length (aligned to the Unix epoch), so a
	// job of the next window is a new one even while this one runs.
	UniqueFor string `json:"unique_for,omitempty"`
	// Timeout bounds each attempt ("30s", "15m", "2h"; from 1s to
	// MaxTimeout): at the deadline the handler's context is cancelled and
	// the attempt fails with a timeout error, retried as usual. Empty: the
	// executor's default for the task, if it has one.
	Timeout string `json:"timeout,omitempty"`
	// DependsOn names jobs of the same group that must succeed before this
	// one may run (REGARDS' reliant tasks): the job is stored pending and
	// released when the last of them succeeds; if one of them fails or is
	// cancelled, this job is cancelled, its error naming that job. Every
	// id must name a job stored already (or, in a workflow, another job
	// of the workflow). Not together with pending or trigger_after.
	DependsOn []string `json:"depends_on,omitempty"`
	// TraceParent is the W3C traceparent the job is stored with: the span
	// of the coordinator that took the submission in, whose parent is the
	// submitter's span when the submission's NATS headers carried one.
	// Never read from the body: the coordinator sets it. Empty when
	// neither side traces.
	TraceParent string `json:"-"`
}

// MaxDelay bounds run_in: a longer delay is more likely a unit mistake.
const MaxDelay = 10 * 365 * 24 * time.Hour

// MaxTimeout bounds a job's timeout.
const MaxTimeout = 7 * 24 * time.Hour

// Held says whether the job is submitted pending: held until released,
// triggered, or until its dependencies succeed.
func (s *Submission) Held() bool { return s.Pending || s.TriggerAfter != nil || len(s.DependsOn) > 0 }

// DecodeSubmission parses a submission body strictly: unknown fields and
// values of the wrong type are errors naming the field. The body may not
// exceed maxArgs plus 64 KiB for the other fields.
func DecodeSubmission(data []byte, maxArgs int64) (Submission, error) {
	var s Submission
	if limit := maxArgs + 64<<10; int64(len(data)) > limit {
		return s, Invalid("args", "submission of %d bytes exceeds the limit of %d bytes (args may be at most %d bytes)", len(data), limit, maxArgs)
	}
	// A valid body decodes without reflecting over every value; anything
	// the fast decoder refuses is decoded again by encoding/json, whose
	// errors are the ones users read (internal/wirejson FuzzUnmarshalStrict:
	// what the fast one accepts, encoding/json accepts, with the same
	// value). A body with a time is decoded by encoding/json too: the fast
	// decoder's times are lenient ("00:00;00Z" passes), RFC 3339 is not.
	if wirejson.UnmarshalStrict(data, &s) != nil || s.RunAt != nil || s.TriggerAfter != nil || s.ExpiresAt != nil {
		s = Submission{}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			if strings.Contains(err.Error(), "parsing time") {
				return s, Invalid(badTimeField(data), "must be an RFC 3339 time such as 2026-01-02T15:04:05Z: %v", err)
			}
			return s, decodeError(err)
		}
		if dec.More() {
			return s, Invalid("body", "unexpected data after the JSON object")
		}
	}
	// Either decoder turns bytes that are not UTF-8 into U+FFFD, so the
	// raw body is checked too (checkJSONText's *Error, nil when it passes,
	// is no error).
	if err := checkJSONText(data, ""); err != nil {
		return s, err
	}
	return s, nil
}

// badTimeField names the time field of a submission body that does not
// parse (the JSON decoder does not say which).
func badTimeField(data []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil {
		for _, name := range []string{"run_at", "trigger_after", "expires_at"} {
			var t time.Time
			if raw, ok := fields[name]; ok && json.Unmarshal(raw, &t) != nil {
				return name
			}
		}
	}
	return "run_at"
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return Invalid("body", "must be a JSON object, not %s", typeErr.Value)
		}
		return Invalid(field, "must be %s, not %s", jsonTypeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return Invalid("body", "not valid JSON: %v (at byte %d)", syntaxErr, syntaxErr.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		if field == "" {
			return Invalid("body", `unknown field ""`)
		}
		return Invalid(field, "unknown field")
	case strings.Contains(err.Error(), "parsing time"):
		return Invalid("run_at", "must be an RFC 3339 time such as 2026-01-02T15:04:05Z: %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Invalid("body", "not valid JSON: it ends too early")
	case errors.Is(err, io.EOF):
		return Invalid("body", "empty body: expected a JSON object")
	}
	return Invalid("body", "%v", err)
}

func jsonTypeName(goType string) string {
	switch goType {
	case "string", "fairway.Priority":
		return "a string"
	case "int", "*int":
		return "a whole number"
	case "time.Time":
		return "an RFC 3339 time string"
	}
	return goType
}

// Normalize checks the submission against the group and task named by its
// subject (either may be "" when the subject names none), fills defaults
// and returns the first problem as an *Error naming the field.
func (s *Submission) Normalize(group, task string, maxArgs int64, defaultRetries int) error {
	if s.Group == "" {
		s.Group = group
	} else if group != "" && s.Group != group {
		return Invalid("group", "body names group %q but the subject names %q", s.Group, group)
	}
	if s.Task == "" {
		s.Task = task
	} else if task != "" && s.Task != task {
		return Invalid("task", "body names task %q but the subject names %q", s.Task, task)
	}
	if err := CheckName("group", s.Group); err != nil {
		return err
	}
	if err := CheckName("task", s.Task); err != nil {
		return err
	}
	if s.ID == "" {
		s.ID = NewID()
	} else if err := checkID(s.ID); err != nil {
		return err
	}
	switch s.Priority {
	case "":
		s.Priority = PriorityLow
	case PriorityHigh, PriorityLow:
	default:
		return Invalid("priority", "unknown priority %q: use \"high\" or \"low\"", s.Priority)
	}
	if err := checkArgs(s.Args, maxArgs); err != nil {
		return err
	}
	if len(s.Args) == 0 {
		s.Args = json.RawMessage("{}")
	}
	if err := checkLen("subject", s.Subject, MaxSubjectLength); err != nil {
		return err
	}
	if err := checkLen("submitter", s.Submitter, MaxSubmitterLength); err != nil {
		return err
	}
	if err := checkLen("tracker", s.Tracker, MaxTrackerLength); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"subject", s.Subject}, {"submitter", s.Submitter}, {"tracker", s.Tracker}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	if err := s.normalizeTimes(time.Now()); err != nil {
		return err
	}
	if err := s.normalizeUnique(time.Now()); err != nil {
		return err
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		switch {
		case err != nil:
			return Invalid("timeout", "%q is not a duration (examples: 30s, 15m, 2h)", s.Timeout)
		case d < time.Second || d > MaxTimeout:
			return Invalid("timeout", "%s is not in 1s..%s", s.Timeout, MaxTimeout)
		}
		s.Timeout = d.String()
	}
	if err := s.normalizeDependsOn(); err != nil {
		return err
	}
	if s.MaxRetries == nil {
		s.MaxRetries = &defaultRetries
	} else if *s.MaxRetries < 0 || *s.MaxRetries > MaxRetriesLimit {
		return Invalid("max_retries", "%d is not in 0..%d", *s.MaxRetries, MaxRetriesLimit)
	}
	return nil
}

// normalizeDependsOn checks depends_on: valid ids, none twice, not the
// job itself, and not with a hold of another kind.
func (s *Submission) normalizeDependsOn() error {
	if s.DependsOn == nil {
		return nil
	}
	if len(s.DependsOn) == 0 {
		s.DependsOn = nil
		return nil
	}
	if len(s.DependsOn) > MaxDependencies {
		return Invalid("depends_on", "%d jobs exceeds the limit of %d", len(s.DependsOn), MaxDependencies)
	}
	if s.Pending || s.TriggerAfter != nil {
		return Invalid("depends_on", "give depends_on or pending/trigger_after, not both: a job with dependencies is held until they succeed")
	}
	seen := make(map[string]bool, len(s.DependsOn))
	for i, id := range s.DependsOn {
		field := fmt.Sprintf("depends_on[%d]", i)
		if id == "" {
			return Invalid(field, "empty job id")
		}
		if err := checkID(id); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return Invalid(field, "%s", e.Message)
			}
			return err
		}
		if id == s.ID {
			return Invalid(field, "job %s cannot depend on itself", id)
		}
		if seen[id] {
			return Invalid(field, "job %s is named twice", id)
		}
		seen[id] = true
	}
	return nil
}

// UniquePrefix starts the tracker that UniqueBy derives.
const UniquePrefix = "unique:"

// normalizeUnique turns unique_by (and unique_for) into the tracker of the
// job: a hash of the chosen fields (args in canonical JSON: keys sorted,
// spaces dropped, numbers as written) and of the window.
func (s *Submission) normalizeUnique(now time.Time) error {
	if len(s.UniqueBy) == 0 {
		if s.UniqueFor != "" {
			return Invalid("unique_for", "needs unique_by: say which fields make the job unique")
		}
		return nil
	}
	if s.Tracker != "" {
		return Invalid("unique_by", "give a tracker or unique_by, not both: a tracker is uniqueness by a key of your own")
	}
	key := map[string]any{}
	for _, f := range s.UniqueBy {
		switch f {
		case "task":
			key["task"] = s.Task
		case "subject":
			key["subject"] = s.Subject
		case "args":
			dec := json.NewDecoder(bytes.NewReader(s.Args))
			dec.UseNumber()
			var args any
			if err := dec.Decode(&args); err != nil {
				return Invalid("args", "not JSON: %v", err)
			}
			key["args"] = args
		case "group":
			// always counts: ids, trackers and keys are per group
		default:
			return Invalid("unique_by", "unknown field %q: use task, args or subject", f)
		}
	}
	if s.UniqueFor != "" {
		d, err := time.ParseDuration(s.UniqueFor)
		if err != nil || d < time.Second || d > MaxDelay {
			return Invalid("unique_for", "%q is not a duration from 1s to %s (examples: 1h, 24h)", s.UniqueFor, MaxDelay)
		}
		key["window"] = now.Truncate(d).Unix()
	}
	data, _ := json.Marshal(key) // maps marshal with sorted keys
	sum := sha256.Sum256(data)
	s.Tracker = UniquePrefix + hex.EncodeToString(sum[:20])
	return nil
}

// normalizeTimes turns run_in into run_at and checks that the times fit
// together.
func (s *Submission) normalizeTimes(now time.Time) error {
	if s.RunIn != "" {
		if s.RunAt != nil {
			return Invalid("run_in", "give run_at or run_in, not both")
		}
		d, err := time.ParseDuration(s.RunIn)
		if err != nil {
			return Invalid("run_in", "%q is not a duration (examples: 90s, 15m, 2h)", s.RunIn)
		}
		if d < 0 || d > MaxDelay {
			return Invalid("run_in", "%s is not in 0s..%s", s.RunIn, MaxDelay)
		}
		at := now.Add(d)
		s.RunAt, s.RunIn = &at, ""
	}
	if s.TriggerAfter != nil && s.RunAt != nil {
		return Invalid("trigger_after", "give run_at (or run_in) or trigger_after, not both: a pending job becomes eligible at trigger_after")
	}
	if s.ExpiresAt != nil {
		start := now
		if s.RunAt != nil {
			start = *s.RunAt
		} else if s.TriggerAfter != nil {
			start = *s.TriggerAfter
		}
		if s.ExpiresAt.Before(start) {
			return Invalid("expires_at", "%s is before the job may start (%s): it could never run", s.ExpiresAt.Format(time.RFC3339), start.Format(time.RFC3339))
		}
	}
	return nil
}

func checkArgs(args json.RawMessage, maxArgs int64) error {
	if int64(len(args)) > maxArgs {
		return Invalid("args", "%d bytes exceeds the limit of %d bytes", len(args), maxArgs)
	}
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' {
		return Invalid("args", "must be a JSON object, not %s", describeJSON(trimmed))
	}
	if !json.Valid(trimmed) {
		return Invalid("args", "not valid JSON")
	}
	if err := checkJSONText(trimmed, "args"); err != nil {
		return err
	}
	return nil
}

func describeJSON(v []byte) string {
	switch v[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func checkLen(field, v string, limit int) error {
	if len(v) > limit {
		return Invalid(field, "%d bytes exceeds the limit of %d", len(v), limit)
	}
	return nil
}

// CheckName checks that a group or task name is one safe NATS subject
// token: 1 to 64 letters, digits, '-' or '_'.
func CheckName(field, name string) error {
	if name == "" {
		return Invalid(field, "missing: every job needs a %s", field)
	}
	if len(name) > MaxNameLength {
		return Invalid(field, "%q is longer than %d characters", name, MaxNameLength)
	}
	for _, r := range name {
		if !isNameRune(r) {
			return Invalid(field, "%q contains %q: only letters, digits, '-' and '_' are allowed (it must be one NATS subject token)", name, r)
		}
	}
	return nil
}

func checkID(id string) error {
	if len(id) > MaxIDLength {
		return Invalid("id", "%d characters exceeds the limit of %d", len(id), MaxIDLength)
	}
	for _, r := range id {
		if !isNameRune(r) && r != '.' && r != ':' {
			return Invalid("id", "%q contains %q: only letters, digits, '-', '_', '.' and ':' are allowed", id, r)
		}
	}
	return nil
}

// NewID returns a new time-ordered job id (UUIDv7).
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		panic(fmt.Sprintf("fairway: generating a job id: %v", err))
	}
	return id.String()
}

// isNameRune says whether r may be in a name: an ASCII letter or digit,
// '-' or '_'.
func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
