package web

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSessionsBoundedPerRole: a flood of logins with the read-only token
// keeps at most maxSessionsPerRole read sessions (the oldest end), and
// never ends an operator's session.
func TestSessionsBoundedPerRole(t *testing.T) {
	s := newSessions(time.Hour)
	s.max = 10
	admin, _ := s.create(roleAdmin)
	var reads []string
	for range 25 {
		id, _ := s.create(roleRead)
		reads = append(reads, id)
	}
	_, ok := s.get(admin)
	require.True(t, ok, "the operator's session ended")
	for i, id := range reads {
		_, ok := s.get(id)
		require.Equal(t, i >= 15, ok, "read session %d of 25", i)
	}
	require.Len(t, s.m, 11)
	require.Equal(t, 10, s.live[roleRead])
	s.delete(reads[24])
	require.Equal(t, 9, s.live[roleRead])
}
