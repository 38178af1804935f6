package fairway

// Partition is one partition of the journal as operators see it (`fairway
// partitions list`, the operator API's partitions): the groups are spread
// over a fixed number of partitions, each led by one coordinator at a time
// (docs/architecture.md, "Partitions").
type Partition struct {
	// Partition is its number, from 0.
	Partition int `json:"partition"`
	// Leader is the coordinator holding its lease ("" when none does:
	// never taken, Epoch 0, or given up by a coordinator that stopped),
	// Epoch the lease's fencing epoch (it grows with each new holder),
	// and LeaseLeftMS how long the lease has left on PostgreSQL's clock
	// (negative: it ran out and no coordinator renewed it).
	Leader      string `json:"leader"`
	Epoch       int64  `json:"epoch"`
	LeaseLeftMS int64  `json:"lease_left_ms"`
	// Database is where its journal and records live: host:port/name.
	Database string `json:"database"`
	// Groups counts the groups with unfinished jobs, and Jobs those jobs
	// by state (pending, waiting, stuck, scheduled, running).
	Groups int           `json:"groups"`
	Jobs   map[State]int `json:"jobs"`
	// UnpublishedRows counts the journal's rows (batches of changes)
	// whose events its leader has not published yet, and LagMS is the age
	// of the oldest of them (0: none): how far the events trail.
	UnpublishedRows int64 `json:"unpublished_rows"`
	LagMS           int64 `json:"lag_ms"`
}
