package fairway_test

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestUniqueByDerivesATracker: the same values give the same key whatever
// the args' key order and spaces; other values, another task or another
// window give another; bad fields and a tracker beside them are refused.
func TestUniqueByDerivesATracker(t *testing.T) {
	key := func(s fairway.Submission) string {
		t.Helper()
		s.Group = "g"
		if s.Task == "" {
			s.Task = "t"
		}
		require.NoError(t, s.Normalize("", "", fairway.DefaultMaxArgsSize, 3))
		return s.Tracker
	}
	a := key(fairway.Submission{UniqueBy: []string{"args"}, Args: []byte(`{"a": 1, "b": [1.50, "x"]}`)})
	require.Contains(t, a, fairway.UniquePrefix)
	require.Equal(t, a, key(fairway.Submission{UniqueBy: []string{"args"}, Args: []byte(`{"b":[1.50,"x"],"a":1}`)}), "order and spaces do not count")
	require.NotEqual(t, a, key(fairway.Submission{UniqueBy: []string{"args"}, Args: []byte(`{"a": 2, "b": [1.50, "x"]}`)}))
	require.Equal(t, a, key(fairway.Submission{UniqueBy: []string{"args"}, Task: "other", Args: []byte(`{"a": 1, "b": [1.50, "x"]}`)}), "task not chosen")
	require.NotEqual(t, a, key(fairway.Submission{UniqueBy: []string{"args", "task"}, Task: "other", Args: []byte(`{"a": 1, "b": [1.50, "x"]}`)}))
	require.NotEqual(t, a, key(fairway.Submission{UniqueBy: []string{"args"}, UniqueFor: "1h", Args: []byte(`{"a": 1, "b": [1.50, "x"]}`)}), "a window counts")
	require.Equal(t, key(fairway.Submission{UniqueBy: []string{"task"}, UniqueFor: "24h"}), key(fairway.Submission{UniqueBy: []string{"task"}, UniqueFor: "24h"}))

	for _, c := range []struct {
		sub   fairway.Submission
		field string
	}{
		{fairway.Submission{UniqueBy: []string{"colour"}}, "unique_by"},
		{fairway.Submission{UniqueBy: []string{"task"}, Tracker: "mine"}, "unique_by"},
		{fairway.Submission{UniqueFor: "1h"}, "unique_for"},
		{fairway.Submission{UniqueBy: []string{"task"}, UniqueFor: "soon"}, "unique_for"},
	} {
		c.sub.Group, c.sub.Task = "g", "t"
		err := c.sub.Normalize("", "", fairway.DefaultMaxArgsSize, 3)
		var fe *fairway.Error
		require.ErrorAs(t, err, &fe)
		require.Equal(t, c.field, fe.Field, "%+v", c.sub)
	}
}
