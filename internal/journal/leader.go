package journal

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"
)

// LeaderConfig configures a Leader.
type LeaderConfig struct {
	// Partition is the partition it leads.
	Partition int16
	// Holder names this coordinator in the lease.
	Holder string
	// TTL is the lease's length (default 3 s); Renew how often the
	// holder renews it and the others try to take it (default 1 s).
	TTL, Renew time.Duration
	// Poll is how often the leader reads the tail (default 50 ms); Wake
	// reads it at once.
	Poll time.Duration
	// SnapshotRows and SnapshotEvery: a snapshot is taken once this many
	// rows were folded since the last one (default 100,000), or this long
	// passed with rows folded (default 10 s), so that a successor folds
	// at most that much.
	SnapshotRows  int
	SnapshotEvery time.Duration
	Logger        *slog.Logger
}

func (c LeaderConfig) withDefaults() LeaderConfig {
	c.TTL = cmp.Or(c.TTL, 3*time.Second)
	c.Renew = cmp.Or(c.Renew, time.Second)
	c.Poll = cmp.Or(c.Poll, 50*time.Millisecond)
	c.SnapshotRows = cmp.Or(c.SnapshotRows, 100_000)
	c.SnapshotEvery = cmp.Or(c.SnapshotEvery, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Leader holds a partition's lease when it can and, while it does, the
// partition's state: restored from the last snapshot, then the fold of
// every row the tail reads, snapshotted as it goes. A coordinator runs one
// per partition; the one that holds the lease leads, the others try to
// take it every Renew and take over within the lease's TTL when the
// leader stops renewing it (dead, frozen, cut off from PostgreSQL).
type Leader struct {
	cfg  LeaderConfig
	db   Querier
	wake chan struct{}

	mu    sync.RWMutex
	lease Lease  // while leading
	state *State // while leading, else nil
	tail  *Tail
	// sinceSnapshot counts the rows folded since the last snapshot, and
	// snapshotAt is when it was taken.
	sinceSnapshot int
	snapshotAt    time.Time
}

// NewLeader makes a Leader of cfg.Partition on db (a pool).
func NewLeader(db Querier, cfg LeaderConfig) *Leader {
	return &Leader{cfg: cfg.withDefaults(), db: db, wake: make(chan struct{}, 1)}
}

// Wake makes the leader read the tail now (rows were appended).
func (l *Leader) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// View calls f with the state and the lease while this coordinator leads
// (ok false otherwise), under a read lock: f must not keep the state.
func (l *Leader) View(f func(s *State, lease Lease)) (ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.state == nil {
		return false
	}
	f(l.state, l.lease)
	return true
}

// Run tries to take the lease, and leads while it holds it, until ctx
// ends. A leader that ends gives nothing up explicitly: its lease runs out
// (a process killed does the same).
func (l *Leader) Run(ctx context.Context) {
	renew := time.NewTicker(l.cfg.Renew)
	defer renew.Stop()
	poll := time.NewTicker(l.cfg.Poll)
	defer poll.Stop()
	l.renew(ctx)
	for {
		select {
		case <-ctx.Done():
			l.drop()
			return
		case <-renew.C:
			l.renew(ctx)
		case <-poll.C:
		case <-l.wake:
		}
		if err := l.catchUp(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("reading the journal", "partition", l.cfg.Partition, "error", err)
		}
	}
}

// renew takes or renews the lease; on taking it, restores the state.
func (l *Leader) renew(ctx context.Context) {
	lease, ok, err := Acquire(ctx, l.db, l.cfg.Partition, l.cfg.Holder, l.cfg.TTL)
	if err != nil {
		if ctx.Err() == nil {
			l.cfg.Logger.Warn("renewing the journal lease: PostgreSQL did not answer", "partition", l.cfg.Partition, "error", err)
		}
		// The lease may run out meanwhile: lead no longer than it lasts.
		l.mu.Lock()
		if l.state != nil && time.Until(l.lease.Until) <= 0 {
			l.state, l.tail = nil, nil
		}
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !ok && l.state != nil:
		l.cfg.Logger.Info("another coordinator leads journal partition now", "partition", l.cfg.Partition)
		l.state, l.tail = nil, nil
	case ok && (l.state == nil || lease.Epoch != l.lease.Epoch):
		began := time.Now()
		state, tail, err := LoadSnapshot(ctx, l.db, l.cfg.Partition)
		if err != nil {
			l.cfg.Logger.Warn("restoring journal partition", "partition", l.cfg.Partition, "error", err)
			return
		}
		l.state, l.tail, l.lease = state, tail, lease
		l.sinceSnapshot, l.snapshotAt = 0, time.Now()
		l.cfg.Logger.Info("this coordinator leads journal partition now", "partition", l.cfg.Partition, "epoch", lease.Epoch,
			"jobs", len(state.Jobs), "restored_in", time.Since(began).String())
	case ok:
		l.lease = lease
	}
}

// catchUp folds what the tail reads, to its end, and takes a snapshot
// when one is due. It holds the lock throughout: View waits for a fold
// in progress. A snapshot saved by a leader that lost the lease without
// knowing is still a state and its position, only older than its
// successor's: restoring it replays more rows, never wrong ones.
func (l *Leader) catchUp(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == nil {
		return nil
	}
	for {
		rows, err := l.tail.Next(ctx, l.db, 10_000)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if _, err := l.state.Apply(r); err != nil {
				return err
			}
		}
		l.sinceSnapshot += len(rows)
	}
	if l.sinceSnapshot >= l.cfg.SnapshotRows || (l.sinceSnapshot > 0 && time.Since(l.snapshotAt) >= l.cfg.SnapshotEvery) {
		if err := SaveSnapshot(ctx, l.db, l.state, l.tail); err != nil {
			return err
		}
		l.sinceSnapshot, l.snapshotAt = 0, time.Now()
	}
	return nil
}

// drop forgets the state (the lease runs out by itself).
func (l *Leader) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state, l.tail = nil, nil
}
