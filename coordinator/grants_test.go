package coordinator

import (
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

func TestCheckRegistration(t *testing.T) {
	ok := fairway.Executor{AppID: "w", Instance: "0192f3a4-7b1c-7def-8abc-0123456789ab", Host: "worker-1.example.com", Slots: 4, Tasks: []string{"send-mail", "export"}}
	mailer := events.Grant{Tasks: []string{"send-mail"}, Slots: 8}
	for _, tc := range []struct {
		name  string
		edit  func(*fairway.Executor)
		grant events.Grant
		field string // "" : accepted
	}{
		{"as an executor registers", func(*fairway.Executor) {}, events.Grant{}, ""},
		{"an IPv6 host", func(e *fairway.Executor) { e.Host = "fe80::1" }, events.Grant{}, ""},
		{"HTML in the host", func(e *fairway.Executor) { e.Host = "<img src=x onerror=alert(1)>" }, events.Grant{}, "host"},
		{"HTML in a task", func(e *fairway.Executor) { e.Tasks = []string{"<b>x</b>"} }, events.Grant{}, "tasks"},
		{"no instance", func(e *fairway.Executor) { e.Instance = "" }, events.Grant{}, "instance"},
		{"a huge instance", func(e *fairway.Executor) { e.Instance = strings.Repeat("i", 1000) }, events.Grant{}, "instance"},
		{"no slot", func(e *fairway.Executor) { e.Slots = 0 }, events.Grant{}, "slots"},
		{"100,000 slots", func(e *fairway.Executor) { e.Slots = 100_000 }, events.Grant{}, "slots"},
		{"no task", func(e *fairway.Executor) { e.Tasks = nil }, events.Grant{}, "tasks"},
		{"a task the credential does not grant", func(*fairway.Executor) {}, mailer, "tasks"},
		{"within the grant", func(e *fairway.Executor) { e.Tasks = []string{"send-mail"} }, mailer, ""},
		{"more slots than granted", func(e *fairway.Executor) { e.Tasks, e.Slots = []string{"send-mail"}, 9 }, mailer, "slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.edit(&e)
			err := checkRegistration(e, tc.grant)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *fairway.Error
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field, fe.Message)
		})
	}
}

func TestNarrowToTheGrant(t *testing.T) {
	req := events.DispatchRequest{Slots: 100, Tasks: []string{"a", "b", "c"}}
	narrow(&req, events.Grant{Tasks: []string{"b", "c"}, Groups: []string{"acme"}, Slots: 4})
	require.Equal(t, events.DispatchRequest{Slots: 8, Tasks: []string{"b", "c"}, Groups: []string{"acme"}}, req)

	req = events.DispatchRequest{Slots: 3, Tasks: []string{"a"}, Groups: []string{"globex"}}
	narrow(&req, events.Grant{Groups: []string{"acme"}})
	require.Zero(t, req.Slots, "asks for a group not granted: no job")

	req = events.DispatchRequest{Slots: 3, Tasks: []string{"a"}}
	narrow(&req, events.Grant{})
	require.Equal(t, events.DispatchRequest{Slots: 3, Tasks: []string{"a"}}, req, "no grant: as asked")
}
