package fairway

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Code classifies an error for clients: it travels in API replies and
// rejected events, so it is part of the wire contract.
type Code string

// The error codes.
const (
	CodeInvalid     Code = "invalid"     // the request is malformed; Field says where
	CodeNotFound    Code = "not_found"   // no such job
	CodeDuplicate   Code = "duplicate"   // a non-final job with the same tracker exists; JobID names it
	CodeConflict    Code = "conflict"    // the job's state does not allow the operation
	CodeUnavailable Code = "unavailable" // a dependency (database, NATS) is down; try again
	CodeInternal    Code = "internal"    // a bug or an unexpected failure
	CodeQuota       Code = "quota"       // a per-group limit was reached; the message names it and when to retry
	// CodeNotRegistered answers an executor's dispatch request when its
	// instance is not the one registered under its app-id (the database
	// was restored, or another instance took the app-id over): it must
	// register again before it gets jobs.
	CodeNotRegistered Code = "not_registered"
)

// Error is Fairway's coded error. It is returned by the store, the
// coordinator and the client, and encoded as-is in API replies.
type Error struct {
	Code    Code   `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	JobID   string `json:"job_id,omitempty"`
	// RequestID names the request of an internal or unavailable error in
	// the coordinator's log, which holds the detail the reply leaves out.
	RequestID string `json:"request_id,omitempty"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Is makes errors.Is(err, ErrInvalid) and friends match any Error with the
// same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is: they match every Error of their code.
var (
	ErrInvalid       = &Error{Code: CodeInvalid}
	ErrNotFound      = &Error{Code: CodeNotFound}
	ErrDuplicate     = &Error{Code: CodeDuplicate}
	ErrConflict      = &Error{Code: CodeConflict}
	ErrUnavailable   = &Error{Code: CodeUnavailable}
	ErrNotRegistered = &Error{Code: CodeNotRegistered}
	ErrQuota         = &Error{Code: CodeQuota}
)

// Invalid returns a CodeInvalid error about field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns the error for a job id that does not exist.
func NotFound(id string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("job %q not found", id), JobID: id}
}

// Conflict returns the error for an operation the job's state forbids.
func Conflict(id string, format string, args ...any) *Error {
	return &Error{Code: CodeConflict, Message: fmt.Sprintf(format, args...), JobID: id}
}

// NotRegistered returns the error for an executor instance that is not the
// registered one.
func NotRegistered(appID, instance string) *Error {
	return &Error{Code: CodeNotRegistered, Field: "instance",
		Message: fmt.Sprintf("executor %q instance %s is not registered: register again", appID, instance)}
}

// Duplicate returns the error for a tracker held by the non-final job id.
func Duplicate(tracker, id string) *Error {
	if strings.HasPrefix(tracker, UniquePrefix) {
		return &Error{Code: CodeDuplicate, Field: "unique_by",
			Message: fmt.Sprintf("job %s has the same unique_by values and is not final yet", id), JobID: id}
	}
	return &Error{Code: CodeDuplicate, Field: "tracker",
		Message: fmt.Sprintf("tracker %q is held by job %s, which is not final yet", tracker, id), JobID: id}
}

// AsError returns err as an *Error: itself if it is one (or wraps one), else
// an internal error carrying its text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// PermanentError marks a task failure that must not be retried: the job
// goes straight to failed.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// SnoozeError is what Snooze returns: the job runs again after Delay.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze, returned by a handler, puts the job back to waiting, due again
// after d (River's JobSnooze, Oban's {:snooze, s}): the attempt is neither a
// success nor a failure, so it does not count against the job's retries
// (its attempt number still counts runs). d is at least a second and at
// most MaxDelay; a shorter one is a second, a longer one MaxDelay.
func Snooze(d time.Duration) error {
	return &SnoozeError{Delay: min(max(d, time.Second), MaxDelay)}
}

// Permanent wraps err so that the job fails without further retries.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}
