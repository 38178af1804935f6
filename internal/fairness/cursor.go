package fairness

// Cursor is the shared selection state: the group the last job came from
// and the counting scheme's position.
type Cursor struct {
	// Group is the group the last job came from; the next turn goes to
	// the group after it.
	Group string
	// Counter is the counting scheme's position.
	Counter int64
}
