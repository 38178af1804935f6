package events

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fairwayhq/fairway"
)

// Grant is what an executor credential allows its holder: the tasks it may
// register and run, the groups whose jobs it may get, and its slots. It is
// written into the credential's user JWT as tags (fairway creds add
// executor NAME --tasks … --groups … --slots N), so it is signed with the
// credential and nobody holding it can widen it. The NATS servers pass the
// tags of the sender of every executor protocol message to the
// coordinators in the Nats-Request-Info header (the executor account's
// imports share their client information), and the coordinators enforce
// the grant on the registration and on every dispatch request.
//
// A nil Tasks or Groups allows any; Slots 0 allows any number.
type Grant struct {
	Tasks  []string `json:"tasks,omitempty"`
	Groups []string `json:"groups,omitempty"`
	Slots  int      `json:"slots,omitempty"`
}

// The tags a grant is written as.
const (
	grantTasksTag  = "fairway-tasks:"
	grantGroupsTag = "fairway-groups:"
	grantSlotsTag  = "fairway-slots:"
)

// RequestInfoHeader is the header in which the NATS servers describe the
// sender of a message that crossed a service import.
const RequestInfoHeader = "Nats-Request-Info"

// Check refuses a grant with a name that is not a task or group name, or
// negative slots.
func (g Grant) Check() error {
	for _, t := range g.Tasks {
		if err := fairway.CheckName("tasks", t); err != nil {
			return err
		}
	}
	for _, grp := range g.Groups {
		if err := fairway.CheckName("groups", grp); err != nil {
			return err
		}
	}
	if g.Slots < 0 {
		return fairway.Invalid("slots", "%d: a credential's slots are 0 (any number) or more", g.Slots)
	}
	return nil
}

// Tags is the grant as user JWT tags (written as they are: task and group
// names keep their case).
func (g Grant) Tags() []string {
	var tags []string
	if g.Tasks != nil {
		tags = append(tags, grantTasksTag+strings.Join(g.Tasks, ","))
	}
	if g.Groups != nil {
		tags = append(tags, grantGroupsTag+strings.Join(g.Groups, ","))
	}
	if g.Slots > 0 {
		tags = append(tags, grantSlotsTag+strconv.Itoa(g.Slots))
	}
	return tags
}

// String says what the grant allows, for people.
func (g Grant) String() string {
	list := func(names []string) string {
		if names == nil {
			return "any"
		}
		return strings.Join(names, ",")
	}
	slots := "any number"
	if g.Slots > 0 {
		slots = strconv.Itoa(g.Slots)
	}
	return fmt.Sprintf("tasks %s, groups %s, slots %s", list(g.Tasks), list(g.Groups), slots)
}

// GrantFromTags reads a grant from user JWT tags (tags that are not a
// grant's are ignored). A tag naming no task or group allows none.
func GrantFromTags(tags []string) (Grant, error) {
	var g Grant
	split := func(v string) []string {
		if v == "" {
			return []string{}
		}
		return strings.Split(v, ",")
	}
	for _, tag := range tags {
		switch {
		case strings.HasPrefix(tag, grantTasksTag):
			g.Tasks = split(tag[len(grantTasksTag):])
		case strings.HasPrefix(tag, grantGroupsTag):
			g.Groups = split(tag[len(grantGroupsTag):])
		case strings.HasPrefix(tag, grantSlotsTag):
			n, err := strconv.Atoi(tag[len(grantSlotsTag):])
			if err != nil || n <= 0 {
				return Grant{}, fmt.Errorf("credential tag %q: slots must be a positive number", tag)
			}
			g.Slots = n
		}
	}
	return g, g.Check()
}

// GrantOf reads the grant of the sender of an executor protocol message
// from the Nats-Request-Info header the NATS servers set (info is its
// value; "" when the message crossed no import: the sender is in the
// coordinators' own account, or the servers run without accounts, and is
// granted everything).
func GrantOf(info string) (Grant, error) {
	if info == "" {
		return Grant{}, nil
	}
	var ci struct {
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(info), &ci); err != nil {
		return Grant{}, fmt.Errorf("undecodable %s header: %w", RequestInfoHeader, err)
	}
	return GrantFromTags(ci.Tags)
}

// AllowsTask says whether the grant allows task.
func (g Grant) AllowsTask(task string) bool {
	return g.Tasks == nil || slices.Contains(g.Tasks, task)
}

// NarrowGroups is the groups a request naming groups (nil: any) may get
// under the grant: their intersection; nil means any, and an empty,
// non-nil slice none.
func (g Grant) NarrowGroups(groups []string) []string {
	switch {
	case g.Groups == nil:
		return groups
	case groups == nil:
		return g.Groups
	}
	out := []string{}
	for _, grp := range groups {
		if slices.Contains(g.Groups, grp) {
			out = append(out, grp)
		}
	}
	return out
}
