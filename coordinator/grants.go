package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// grants reads what the sender of an executor protocol message may run
// (events.Grant) from the header the NATS servers set, and remembers the
// few distinct headers it sees: a dispatch request decodes none.
type grants struct {
	mu    sync.Mutex
	known map[string]events.Grant
}

// of returns the grant of msg's sender.
func (g *grants) of(msg *nats.Msg) (events.Grant, error) {
	info := ""
	if msg.Header != nil {
		info = msg.Header.Get(events.RequestInfoHeader)
	}
	if info == "" {
		return events.Grant{}, nil
	}
	g.mu.Lock()
	grant, ok := g.known[info]
	g.mu.Unlock()
	if ok {
		return grant, nil
	}
	grant, err := events.GrantOf(info)
	if err != nil {
		return events.Grant{}, fmt.Errorf("reading the executor credential's grant: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// The header names the connection too: each connection of each
	// executor is one entry. Start afresh past a bound.
	if g.known == nil || len(g.known) >= 10_000 {
		g.known = map[string]events.Grant{}
	}
	g.known[info] = grant
	return grant, nil
}

// Bounds of a registration.
const (
	// maxRegisteredSlots bounds the slots one executor instance registers.
	maxRegisteredSlots = 10_000
	// maxRegisteredTasks bounds the tasks one executor instance registers.
	maxRegisteredTasks = 1_000
	// maxHostLength bounds an executor's host name (a DNS name's).
	maxHostLength = 253
	// maxInstanceLength bounds an executor instance's id.
	maxInstanceLength = 128
)

// checkRegistration refuses a registration that names what no executor
// is (a host or instance that is not a name, a task that is not a task
// name, slots out of range) or more than its credential grants.
func checkRegistration(e fairway.Executor, grant events.Grant) error {
	if err := checkToken("instance", e.Instance, maxInstanceLength); err != nil {
		return err
	}
	if e.Host != "" {
		if err := checkToken("host", e.Host, maxHostLength); err != nil {
			return err
		}
	}
	if e.Slots < 1 || e.Slots > maxRegisteredSlots {
		return fairway.Invalid("slots", "%d: an executor registers 1 to %d slots", e.Slots, maxRegisteredSlots)
	}
	if grant.Slots > 0 && e.Slots > grant.Slots {
		return fairway.Invalid("slots", "%d: this executor's credential grants at most %d slots (fairway creds add executor %s --slots)", e.Slots, grant.Slots, e.AppID)
	}
	if len(e.Tasks) == 0 || len(e.Tasks) > maxRegisteredTasks {
		return fairway.Invalid("tasks", "%d tasks: an executor registers 1 to %d", len(e.Tasks), maxRegisteredTasks)
	}
	var refused []string
	for _, t := range e.Tasks {
		if err := fairway.CheckName("tasks", t); err != nil {
			return err
		}
		if !grant.AllowsTask(t) {
			refused = append(refused, t)
		}
	}
	if len(refused) > 0 {
		return fairway.Invalid("tasks", "%s: this executor's credential does not grant them (it grants %s); issue one that does with fairway creds add executor %s --tasks",
			strings.Join(refused, ", "), grant.String(), e.AppID)
	}
	return nil
}

// checkToken refuses a value that is not one token of letters, digits and
// . _ : - (a host name, an address, an id).
func checkToken(field, v string, max int) error {
	if v == "" {
		return fairway.Invalid(field, "missing")
	}
	if len(v) > max {
		return fairway.Invalid(field, "%d characters: at most %d", len(v), max)
	}
	for _, r := range v {
		if letterOrDigit := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'; !letterOrDigit && !strings.ContainsRune("._:-", r) {
			return fairway.Invalid(field, "%q contains %q: only letters, digits, '.', '_', ':' and '-' are allowed", v, r)
		}
	}
	return nil
}

// narrow keeps a dispatch request within its sender's grant: its tasks,
// slots and groups.
func narrow(req *events.DispatchRequest, grant events.Grant) {
	if grant.Tasks != nil {
		req.Tasks = slices.DeleteFunc(req.Tasks, func(t string) bool { return !grant.AllowsTask(t) })
	}
	if grant.Slots > 0 {
		req.Slots = min(req.Slots, 2*grant.Slots)
	}
	req.Groups = grant.NarrowGroups(req.Groups)
	if req.Groups != nil && len(req.Groups) == 0 {
		req.Slots = 0 // no group granted: no job
	}
}
