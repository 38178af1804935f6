package fairway

import "time"

// Progress is a job's progress as the coordinators publish it, at most
// once a second per job, on <prefix>.progress.<group>.<task> (core NATS:
// not stored as events; the job row keeps the latest value).
type Progress struct {
	Group    string `json:"group"`
	Task     string `json:"task"`
	JobID    string `json:"job_id"`
	Attempt  int    `json:"attempt"`
	Progress int    `json:"progress"` // percent
	// Started is when the attempt started; EstimatedEnd is when it will
	// end at the pace so far (EstimateEnd), absent below 1% and at 100%.
	Started      *time.Time `json:"started,omitempty"`
	EstimatedEnd *time.Time `json:"estimated_end,omitempty"`
	Time         time.Time  `json:"time"`
}

// EstimateEnd is when an attempt that started at started and is pct
// percent done at now will end, at the pace so far (REGARDS' completion
// estimate): nil when pct is not in 1..99.
func EstimateEnd(started time.Time, pct int, now time.Time) *time.Time {
	if pct < 1 || pct > 99 || now.Before(started) {
		return nil
	}
	end := started.Add(now.Sub(started) * 100 / time.Duration(pct))
	return &end
}
