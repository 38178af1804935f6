package fairness

import "github.com/fairwayhq/fairway"

// Candidate is a job a claim may take: a due stuck job or a waiting one.
type Candidate struct {
	ID       string
	Group    string
	Task     string
	State    fairway.State
	Priority fairway.Priority
}
