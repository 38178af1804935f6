package coordinator

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestSequenceID: the id derived from a message's stream sequence is a
// UUIDv7 whose time is the message's, in milliseconds, the same for the
// same message and another for another sequence.
func TestSequenceID(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 30, 15, 123_456_789, time.UTC)
	id := sequenceID("FAIRWAY_SUBMIT", 42, at)
	// The id of earlier versions (a redelivery after an upgrade must make
	// the same job).
	if want := "01a216fa-0a53-7dc2-b1b8-41997fce4c05"; id != want {
		t.Fatalf("id %s, want %s", id, want)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("%s: version %d, variant %v; want 7, RFC 4122", id, u.Version(), u.Variant())
	}
	sec, nsec := u.Time().UnixTime()
	if got := time.Unix(sec, nsec).UTC(); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("%s: time %v, want %v", id, got, at.Truncate(time.Millisecond))
	}
	if again := sequenceID("FAIRWAY_SUBMIT", 42, at); again != id {
		t.Fatalf("the same message made %s, then %s", id, again)
	}
	if other := sequenceID("FAIRWAY_SUBMIT", 43, at); other == id {
		t.Fatalf("sequences 42 and 43 made the same id %s", id)
	}
}
