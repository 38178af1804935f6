package events_test

import (
	"testing"

	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

func TestGrantRoundTripsThroughTags(t *testing.T) {
	for _, g := range []events.Grant{
		{},
		{Tasks: []string{"Send-Mail", "export"}},
		{Groups: []string{"acme"}, Slots: 4},
		{Tasks: []string{}, Groups: []string{}},
	} {
		got, err := events.GrantFromTags(append([]string{"other-tag"}, g.Tags()...))
		require.NoError(t, err)
		require.Equal(t, g, got)
	}
}

func TestGrantOfTheRequestInfoHeader(t *testing.T) {
	g, err := events.GrantOf("")
	require.NoError(t, err)
	require.Equal(t, events.Grant{}, g, "no header: no import crossed, nothing narrowed")
	g, err = events.GrantOf(`{"acc":"AB","tags":["fairway-tasks:echo","fairway-groups:acme","fairway-slots:2"]}`)
	require.NoError(t, err)
	require.Equal(t, events.Grant{Tasks: []string{"echo"}, Groups: []string{"acme"}, Slots: 2}, g)
	_, err = events.GrantOf(`{"tags":["fairway-slots:-1"]}`)
	require.Error(t, err)
	_, err = events.GrantOf(`{"tags":["fairway-tasks:<b>"]}`)
	require.Error(t, err)
}

func TestGrantNarrowsGroups(t *testing.T) {
	require.Nil(t, events.Grant{}.NarrowGroups(nil))
	require.Equal(t, []string{"a"}, events.Grant{}.NarrowGroups([]string{"a"}))
	require.Equal(t, []string{"a"}, events.Grant{Groups: []string{"a"}}.NarrowGroups(nil))
	require.Equal(t, []string{}, events.Grant{Groups: []string{"a"}}.NarrowGroups([]string{"b"}))
}
