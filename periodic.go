package fairway

import (
	"encoding/json"
	"time"
)

// PeriodicTask submits a job each time its calendar event comes round
// (Docspell's periodic tasks). Its jobs carry its id as their tracker, so
// a due time is skipped while the previous job has not ended.
type PeriodicTask struct {
	ID        string          `json:"id"`
	Enabled   bool            `json:"enabled"`
	Task      string          `json:"task"`
	Group     string          `json:"group"`
	Args      json.RawMessage `json:"args,omitempty"`
	Subject   string          `json:"subject,omitempty"`
	Submitter string          `json:"submitter,omitempty"`
	Priority  Priority        `json:"priority,omitempty"`
	// Timer is the calendar event, e.g. "Mon..Fri *-*-* 08:00".
	Timer string `json:"timer"`
	// NextRun is when it fires next.
	NextRun time.Time `json:"nextrun"`
	// MarkedBy and Marked say which coordinator is firing it, since when.
	// (The JSON name "worker" is the wire contract: it stays.)
	MarkedBy string     `json:"worker,omitempty"`
	Marked   *time.Time `json:"marked,omitempty"`
	Created  time.Time  `json:"created"`
}
