package store

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestAStatementThatLostARaceRunsAgain: a deadlock or a serialization
// failure (raw, or as interpretError says it) runs the statement again at
// once, conflictTries times at most; any other error is returned at once;
// and a round of Complete that lost such a race is run again whole.
func TestAStatementThatLostARaceRunsAgain(t *testing.T) {
	deadlock := &pgconn.PgError{Code: pgDeadlock, Message: "deadlock detected"}
	for name, lost := range map[string]error{"raw": deadlock, "interpreted": interpretError(deadlock),
		"serialization": &pgconn.PgError{Code: pgSerialization, Message: "could not serialize access"}} {
		calls := 0
		err := againOnConflict(func() error {
			calls++
			if calls < 3 {
				return lost
			}
			return nil
		})
		require.NoError(t, err, name)
		require.Equal(t, 3, calls, name)

		calls = 0
		err = againOnConflict(func() error { calls++; return lost })
		require.True(t, conflicted(err), name)
		require.Equal(t, conflictTries, calls, name)
	}
	other := errors.New("syntax error")
	calls := 0
	require.ErrorIs(t, againOnConflict(func() error { calls++; return other }), other)
	require.Equal(t, 1, calls)
	require.False(t, conflicted(interpretError(&pgconn.PgError{Code: "23505"})))

	rounds := 0
	applied, err := completeRounds([]Outcome{{}, {}}, func(left []Outcome) ([]Applied, []int, error) {
		rounds++
		if rounds == 1 {
			return nil, nil, interpretError(deadlock)
		}
		return make([]Applied, len(left)), nil, nil
	})
	require.NoError(t, err)
	require.Len(t, applied, 2)
	require.Equal(t, 2, rounds)
}
