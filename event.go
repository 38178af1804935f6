package fairway

import "time"

// Event is the body of a lifecycle event, published to
// <p>.events.<group>.<task>.<state> after the state change committed.
type Event struct {
	// ID is the event's stable, unique id; it is also the message's
	// Nats-Msg-Id, so subscribers can drop duplicates.
	ID            string `json:"id"`
	JobID         string `json:"job_id"`
	Task          string `json:"task"`
	Group         string `json:"group"`
	State         State  `json:"state"`
	PreviousState State  `json:"previous_state,omitempty"`
	// Attempt counts the job's runs: 1 for the first run, 0 before any.
	Attempt int `json:"attempt"`
	// Error is the failure's text (stuck, failed) or the rejection's reason.
	Error string `json:"error,omitempty"`
	// Code and Field classify a rejection (see Error).
	Code  Code   `json:"code,omitempty"`
	Field string `json:"field,omitempty"`
	// Executor is the app-id of the executor holding the job.
	Executor string `json:"executor,omitempty"`
	// Periodic is the periodic task of a fired or skipped event.
	Periodic string    `json:"periodic,omitempty"`
	Time     time.Time `json:"time"`
}
