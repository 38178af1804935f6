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
	// TTL is the lease's length (default 1.5 s); Renew how often the
	// holder renews it and the others try to take it (default 0.5 s).
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
	c.TTL = cmp.Or(c.TTL, 1500*time.Millisecond)
	c.Renew = cmp.Or(c.Renew, 500*time.Millisecond)
	c.Poll = cmp.Or(c.Poll, 50*time.Millisecond)
	c.SnapshotRows = cmp.Or(c.SnapshotRows, 100_000)
	c.SnapshotEvery = cmp.Or(c.SnapshotEvery, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Leader follows a partition, and leads it when it holds its lease: it
// holds the partition's state, restored once from the last snapshot and
// then the fold of every row the tail reads, leader or not (a hot
// follower: taking over restores nothing), and while it leads it
// snapshots the state as it goes. A coordinator will run one per
// partition (none does yet: docs/journal.md, step 3);
// the one that holds the lease leads, the others try to take it every
// Renew and take over within the lease's TTL when the leader stops
// renewing it (dead, frozen, cut off from PostgreSQL).
type Leader struct {
	cfg  LeaderConfig
	db   Querier
	wake chan struct{}

	mu      sync.RWMutex
	leading bool
	lease   Lease  // while leading
	state   *State // once restored
	queues  *Queues
	tail    *Tail
	// restores counts the restores from a snapshot (one, unless reading
	// the journal failed).
	restores int
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
	if !l.leading || l.state == nil {
		return false
	}
	f(l.state, l.lease)
	return true
}

// Follow calls f with the state as this coordinator has folded it so far,
// leader or not (ok false before it is restored), under a read lock.
func (l *Leader) Follow(f func(s *State)) (ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.state == nil {
		return false
	}
	f(l.state)
	return true
}

// Restores counts the times the state was restored from a snapshot.
func (l *Leader) Restores() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.restores
}

// Run follows the partition, tries to take the lease and leads while it
// holds it, until ctx ends. A leader that ends gives nothing up explicitly: its lease runs out
// (a process killed does the same).
func (l *Leader) Run(ctx context.Context) {
	renew := time.NewTicker(l.cfg.Renew)
	defer renew.Stop()
	poll := time.NewTicker(l.cfg.Poll)
	defer poll.Stop()
	l.renew(ctx)
	for {
		// Restored and caught up at once, then at each tick or wake.
		if err := l.catchUp(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("reading the journal", "partition", l.cfg.Partition, "error", err)
		}
		select {
		case <-ctx.Done():
			l.drop()
			return
		case <-renew.C:
			l.renew(ctx)
		case <-poll.C:
		case <-l.wake:
		}
	}
}

// renew takes or renews the lease.
func (l *Leader) renew(ctx context.Context) {
	lease, ok, err := Acquire(ctx, l.db, l.cfg.Partition, l.cfg.Holder, l.cfg.TTL)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.cfg.Logger.Warn("renewing the journal lease: PostgreSQL did not answer", "partition", l.cfg.Partition, "error", err)
		}
		// The lease may run out meanwhile: lead no longer than it lasts.
		if l.leading && time.Until(l.lease.Until) <= 0 {
			l.leading = false
		}
	case !ok && l.leading:
		l.cfg.Logger.Info("another coordinator leads journal partition now", "partition", l.cfg.Partition)
		l.leading = false
	case ok && (!l.leading || lease.Epoch != l.lease.Epoch):
		l.leading, l.lease = true, lease
		l.sinceSnapshot, l.snapshotAt = 0, time.Now()
		l.cfg.Logger.Info("this coordinator leads journal partition now", "partition", l.cfg.Partition, "epoch", lease.Epoch)
	case ok:
		l.lease = lease
	}
}

// restore reads the last snapshot, once.
func (l *Leader) restore(ctx context.Context) error {
	if l.state != nil {
		return nil
	}
	began := time.Now()
	state, tail, err := LoadSnapshot(ctx, l.db, l.cfg.Partition)
	if err != nil {
		return err
	}
	l.state, l.tail = state, tail
	l.queues = NewQueues(state, time.Now().UnixMicro())
	l.restores++
	l.cfg.Logger.Info("journal partition restored", "partition", l.cfg.Partition, "jobs", len(state.Jobs), "in", time.Since(began).String())
	return nil
}

// catchUp folds what the tail reads, to its end, and takes a snapshot
// when one is due. It holds the lock throughout: View waits for a fold
// in progress. A snapshot saved by a leader that lost the lease without
// knowing is still a state and its position, only older than its
// successor's: restoring it replays more rows, never wrong ones.
func (l *Leader) catchUp(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.restore(ctx); err != nil {
		return err
	}
	if err := l.fold(ctx); err != nil {
		return err
	}
	if !l.leading {
		return nil
	}
	if l.sinceSnapshot >= l.cfg.SnapshotRows || (l.sinceSnapshot > 0 && time.Since(l.snapshotAt) >= l.cfg.SnapshotEvery) {
		if err := SaveSnapshot(ctx, l.db, l.state, l.tail); err != nil {
			return err
		}
		l.sinceSnapshot, l.snapshotAt = 0, time.Now()
	}
	return nil
}

// fold applies to the state every row the tail reads now, and keeps the
// queues up to date with the changes. Called with l.mu held.
func (l *Leader) fold(ctx context.Context) error {
	for {
		rows, err := l.tail.Next(ctx, l.db, foldBatch)
		if err != nil || len(rows) == 0 {
			return err
		}
		now := time.Now().UnixMicro()
		for _, r := range rows {
			changes, err := l.state.Apply(r)
			if err != nil {
				return err
			}
			l.sinceSnapshot++
			for _, c := range changes {
				l.queues.Release(now, c.Job)
			}
		}
	}
}

// drop stops leading (the lease runs out by itself).
func (l *Leader) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = false
}
