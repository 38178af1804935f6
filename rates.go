package fairway

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseRate reads a rate limit's "N/period": N starts per second (s),
// minute (m), hour (h) or day (d), or per a Go duration of at least a
// second ("10/s", "100/m", "5/30s").
func ParseRate(text string) (starts int, period time.Duration, err error) {
	n, per, ok := strings.Cut(text, "/")
	if !ok {
		return 0, 0, Invalid("rate", "%q is not N/period (examples: 10/s, 100/m, 5000/h, 5/30s)", text)
	}
	starts, err = strconv.Atoi(n)
	if err != nil || starts <= 0 || starts > 1_000_000 {
		return 0, 0, Invalid("rate", "%q: the number of starts must be 1 to 1,000,000", text)
	}
	switch per {
	case "s":
		period = time.Second
	case "m":
		period = time.Minute
	case "h":
		period = time.Hour
	case "d":
		period = 24 * time.Hour
	default:
		period, err = time.ParseDuration(per)
		if err != nil || period < time.Second || period > 7*24*time.Hour {
			return 0, 0, Invalid("rate", "%q: the period is s, m, h, d or a duration from 1s to 168h", text)
		}
	}
	return starts, period, nil
}

// FormatRate writes a rate as ParseRate reads it.
func FormatRate(starts int, period time.Duration) string {
	switch period {
	case time.Second:
		return fmt.Sprintf("%d/s", starts)
	case time.Minute:
		return fmt.Sprintf("%d/m", starts)
	case time.Hour:
		return fmt.Sprintf("%d/h", starts)
	case 24 * time.Hour:
		return fmt.Sprintf("%d/d", starts)
	}
	return fmt.Sprintf("%d/%s", starts, period)
}

// RateLimit is one rate limit as listed and set.
type RateLimit struct {
	// Task is the task counted ("": every task).
	Task string `json:"task,omitempty"`
	// Group is the group counted ("": the whole cluster; "*": each group
	// without a limit of its own, separately).
	Group string `json:"group,omitempty"`
	// Rate is "N/period".
	Rate    string    `json:"rate"`
	Updated time.Time `json:"updated,omitzero"`
}

// Scope is how a rate limit is named on the command line: task:T,
// group:G, or both ("task:send-mail,group:*").
func (l RateLimit) Scope() string {
	var parts []string
	if l.Task != "" {
		parts = append(parts, "task:"+l.Task)
	}
	if l.Group != "" {
		parts = append(parts, "group:"+l.Group)
	}
	return strings.Join(parts, ",")
}

// ParseRateScope reads a scope (see RateLimit.Scope).
func ParseRateScope(scope string) (task, group string, err error) {
	for part := range strings.SplitSeq(scope, ",") {
		kind, name, _ := strings.Cut(part, ":")
		switch {
		case kind == "task" && task == "":
			if err := CheckName("task", name); err != nil {
				return "", "", err
			}
			task = name
		case kind == "group" && group == "":
			if name != "*" {
				if err := CheckName("group", name); err != nil {
					return "", "", err
				}
			}
			group = name
		default:
			return "", "", Invalid("scope", "%q: name task:TASK, group:GROUP (group:* for each group), or both separated by a comma", scope)
		}
	}
	if task == "" && group == "" {
		return "", "", Invalid("scope", "missing: name task:TASK, group:GROUP, or both")
	}
	return task, group, nil
}

// GroupShare is one group's share of the executors' slot-time over a
// window, against its weighted fair share.
type GroupShare struct {
	Group  string  `json:"group"`
	Weight float64 `json:"weight"`
	// Seconds is the slot-time its jobs ran in the window.
	Seconds float64 `json:"seconds"`
	// Share is Seconds over every group's.
	Share float64 `json:"share"`
	// FairShare is its weight over the weights of the groups that ran
	// jobs in the window: its share if they all had work all the time.
	FairShare float64 `json:"fair_share"`
}
