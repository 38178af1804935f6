package cli

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNegativesAsArgs: from the first negative number in the place of an
// argument on, the arguments go after "--"; flags and their values stay.
func TestNegativesAsArgs(t *testing.T) {
	root := newRoot(io.Discard, io.Discard, nil)
	for _, c := range []struct{ in, want []string }{
		{[]string{"limits", "set", "task", "sleep", "-1"}, []string{"limits", "set", "task", "sleep", "--", "-1"}},
		{[]string{"groups", "set-weight", "acme", "-0.5", "--nats-url", "u"}, []string{"groups", "set-weight", "acme", "--nats-url", "u", "--", "-0.5"}},
		{[]string{"groups", "set-weight", "--nats-url", "u", "-5", "acme"}, []string{"groups", "set-weight", "--nats-url", "u", "--", "-5", "acme"}},
		{[]string{"executor", "--prefetch", "-1"}, []string{"executor", "--prefetch", "-1"}},
		{[]string{"executor", "--prefetch=-1", "--log-level", "debug"}, []string{"executor", "--prefetch=-1", "--log-level", "debug"}},
		{[]string{"limits", "set", "task", "x", "--", "-1"}, []string{"limits", "set", "task", "x", "--", "-1"}},
		{[]string{"submit", "echo", "-h"}, []string{"submit", "echo", "-h"}},
	} {
		require.Equal(t, c.want, negativesAsArgs(root, c.in), "%v", c.in)
	}
}
