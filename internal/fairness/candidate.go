package fairness

import "github.com/fairwayhq/fairway"

// Candidate is a job a claim may take: a due stuck job or a waiting one.
type Candidate struct {
	ID       string
	Group    string
	Task     string
	State    fairway.State
	Priority fairway.Priority
	// Charge is, once PickShares took it, how far it moved its group's
	// virtual time (its cost over its group's weight); 0 without shares.
	Charge float64
}
