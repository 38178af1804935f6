package coordinator

import (
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

// TestListFiltersAreNamesOfBoundedSize: a list request's task and group
// filters are names (a 900 KB task filter was accepted and matched
// against every job), and a cursor is one this API gave.
func TestListFiltersAreNamesOfBoundedSize(t *testing.T) {
	for _, tc := range []struct {
		req   events.ListRequest
		field string
	}{
		{events.ListRequest{Task: strings.Repeat("t", 900_000)}, "task"},
		{events.ListRequest{Task: "<script>"}, "task"},
		{events.ListRequest{Group: "a b"}, "group"},
		{events.ListRequest{Cursor: strings.Repeat("c", 5000)}, "cursor"},
	} {
		_, err := listParams(request{admin: true}, tc.req)
		var fe *fairway.Error
		require.ErrorAs(t, err, &fe)
		require.Equal(t, tc.field, fe.Field)
	}
	p, err := listParams(request{group: "acme"}, events.ListRequest{Task: "send-mail"})
	require.NoError(t, err)
	require.Equal(t, "acme", p.Group)
	require.Equal(t, "send-mail", p.Task)
}
