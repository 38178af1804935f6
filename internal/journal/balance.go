package journal

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Balance decides which partitions' leases a coordinator takes and keeps
// (LeaderConfig.Balance; nil: it takes every lease it can, as with one
// partition).
type Balance interface {
	// Take says whether to try to take partition's lease, which this
	// coordinator does not hold.
	Take(partition int16) bool
	// Keep says whether to keep leading partition: false gives its lease
	// up (Yield), for a coordinator that has fewer than its share.
	Keep(partition int16) bool
}

// BalancerConfig configures a Balancer.
type BalancerConfig struct {
	// Holder names this coordinator, as in the leases.
	Holder string
	// Partitions is the cluster's count of partitions.
	Partitions int
	// Beat is how often the coordinator says it is alive and looks at
	// the leases (default 0.5 s); Gone how long a coordinator that said
	// nothing counts as gone (default 3 s).
	Beat, Gone time.Duration
	// Grace is how long a lease given up waits for a coordinator below
	// its share before any takes it (default 1 s).
	Grace time.Duration
	// Databases are the partitions' databases, by partition, where they
	// are not all the Balancer's own (nil: every lease is there): each
	// partition's lease lives in its own database, and the Balancer
	// reads each database's leases. One that does not answer leaves its
	// partitions out of the look (neither free nor held) until it does.
	Databases []Querier
	Logger    *slog.Logger
}

// Balancer spreads the partitions' leases over the coordinators that run
// (issue 34): each leads its share, P/N partitions of P over N
// coordinators (the first P mod N, in the order of their names, one
// more). A coordinator above its share gives one lease up at a beat, while
// another is below its share; one below takes a lease given up, or one
// never taken. A lease that ran out without being given up (its holder
// died, or stood still past it) is taken by the first coordinator to try,
// whatever the shares, so that its partition is led again within the
// lease; the shares are mended after. The coordinators say they are alive
// in fairway_coordinator (the cluster's database); each partition's lease
// is in its own database (BalancerConfig.Databases).
type Balancer struct {
	db  Querier
	cfg BalancerConfig

	mu   sync.Mutex
	view balanceView
	// lapsed are the holders of leases found run out without being given
	// up, with when (look's goroutine only): a coordinator that stopped
	// renewing is not counted in the shares while its row says it is
	// alive (for Gone after its last beat). Counted, the coordinator that
	// took its leases gave one back to it at the next beat, as to one
	// below its share, and took it again after Grace: a partition without
	// a leader for a second more.
	lapsed map[string]time.Time
}

// balanceView is the Balancer's last look at the coordinators and leases.
type balanceView struct {
	read bool
	// share is this coordinator's share; mine the partitions it holds.
	share int
	mine  []int16
	// free are the partitions whose lease nobody holds: given up
	// (yielded, with how long ago) or run out (orphaned), or never taken.
	free map[int16]freeLease
	// below says another live coordinator holds fewer than its share.
	below bool
}

type freeLease struct {
	orphaned bool
	since    time.Duration
}

// NewBalancer makes the Balancer of cfg.Holder over db.
func NewBalancer(db Querier, cfg BalancerConfig) *Balancer {
	if cfg.Beat <= 0 {
		cfg.Beat = 500 * time.Millisecond
	}
	if cfg.Gone <= 0 {
		cfg.Gone = 3 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Balancer{db: db, cfg: cfg, lapsed: map[string]time.Time{}}
}

// Run says this coordinator is alive and looks at the leases, every Beat,
// until ctx ends (it leaves its row: the others count it gone after Gone,
// as they would a coordinator that died).
func (b *Balancer) Run(ctx context.Context) {
	tick := time.NewTicker(b.cfg.Beat)
	defer tick.Stop()
	for {
		if err := b.look(ctx); err != nil && ctx.Err() == nil {
			b.cfg.Logger.Warn("balancing the partitions: PostgreSQL did not answer", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

const beatSQL = `INSERT INTO fairway_coordinator (holder, seen) VALUES ($1, now())
ON CONFLICT (holder) DO UPDATE SET seen = EXCLUDED.seen`

// balanceSQL reads the live coordinators and the leases of the
// partitions $2 in one round trip.
const balanceSQL = `
SELECT 'c', holder, false, 0::float8, 0::smallint FROM fairway_coordinator WHERE seen > now() - $1::interval
UNION ALL
SELECT 'l', holder, until > now(), extract(epoch FROM now() - until)::float8, partition FROM fairway_journal_lease WHERE partition = ANY($2::smallint[])`

// leasesSQL reads the leases of the partitions $1 in another database.
const leasesSQL = `SELECT 'l', holder, until > now(), extract(epoch FROM now() - until)::float8, partition FROM fairway_journal_lease WHERE partition = ANY($1::smallint[])`

// databases groups the partitions by the database that holds their
// lease, the Balancer's own first.
func (b *Balancer) databases() (dbs []Querier, parts [][]int16) {
	dbs, parts = []Querier{b.db}, [][]int16{nil}
	for p := range b.cfg.Partitions {
		q := b.db
		if p < len(b.cfg.Databases) && b.cfg.Databases[p] != nil {
			q = b.cfg.Databases[p]
		}
		k := slices.Index(dbs, q)
		if k < 0 {
			k = len(dbs)
			dbs, parts = append(dbs, q), append(parts, nil)
		}
		parts[k] = append(parts[k], int16(p)) //nolint:gosec // G115: at most partition.Max
	}
	return dbs, parts
}

// look says this coordinator is alive, reads the others and the leases,
// and works out what it takes and keeps.
func (b *Balancer) look(ctx context.Context) error {
	bt := &pgx.Batch{}
	bt.Queue(beatSQL, b.cfg.Holder)
	// A coordinator's holder is new at each start: the rows of those gone
	// long ago go.
	bt.Queue(`DELETE FROM fairway_coordinator WHERE seen < now() - interval '1 hour'`)
	var live []string
	holders := map[int16]string{}
	v := balanceView{read: true, free: map[int16]freeLease{}}
	taken := map[int16]bool{}
	read := func(rows pgx.Rows) error {
		for rows.Next() {
			var kind, holder string
			var held bool
			var since float64
			var p int16
			if err := rows.Scan(&kind, &holder, &held, &since, &p); err != nil {
				return err
			}
			if kind == "c" {
				live = append(live, holder)
				continue
			}
			taken[p] = true
			if held {
				holders[p] = holder
				continue
			}
			v.free[p] = freeLease{orphaned: holder != "", since: seconds(since)}
			if holder != "" {
				b.lapsed[holder] = time.Now()
			}
		}
		return rows.Err()
	}
	dbs, parts := b.databases()
	bt.Queue(balanceSQL, b.cfg.Gone.String(), parts[0]).Query(read)
	if err := b.db.SendBatch(ctx, bt).Close(); err != nil {
		return fmt.Errorf("reading the coordinators and the partitions' leases: %w", err)
	}
	seen := slices.Clone(parts[0])
	for k, q := range dbs[1:] {
		rows, err := q.Query(ctx, leasesSQL, parts[k+1])
		if err == nil {
			err = read(rows)
			rows.Close()
		}
		if err != nil {
			// Its partitions are left out: taken for free, every
			// coordinator would try them; taken for held, none would.
			b.cfg.Logger.Warn("balancing the partitions: a database of theirs did not answer; its partitions wait for it", "partitions", parts[k+1], "error", err)
			continue
		}
		seen = append(seen, parts[k+1]...)
	}
	for _, p := range seen {
		if !taken[p] {
			v.free[p] = freeLease{}
		}
	}
	for holder, at := range b.lapsed {
		if time.Since(at) > b.cfg.Gone {
			delete(b.lapsed, holder)
		}
	}
	live = slices.DeleteFunc(live, func(c string) bool { _, lapsed := b.lapsed[c]; return lapsed && c != b.cfg.Holder })
	if !slices.Contains(live, b.cfg.Holder) {
		live = append(live, b.cfg.Holder)
	}
	slices.Sort(live)
	shares := map[string]int{}
	for i, c := range live {
		shares[c] = b.cfg.Partitions / len(live)
		if i < b.cfg.Partitions%len(live) {
			shares[c]++
		}
	}
	held := map[string]int{}
	for p, h := range holders {
		held[h]++
		if h == b.cfg.Holder {
			v.mine = append(v.mine, p)
		}
	}
	slices.Sort(v.mine)
	v.share = shares[b.cfg.Holder]
	for _, c := range live {
		if c != b.cfg.Holder && held[c] < shares[c] {
			v.below = true
		}
	}
	b.mu.Lock()
	b.view = v
	b.mu.Unlock()
	return nil
}

// Take says whether to try to take partition's lease: one run out without
// being given up, always; one given up or never taken, while this
// coordinator holds fewer than its share, or once it has waited Grace for
// one that does.
func (b *Balancer) Take(partition int16) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := &b.view
	if !v.read {
		return false
	}
	f, free := v.free[partition]
	switch {
	case !free:
		return false
	case f.orphaned:
		return true
	case len(v.mine) < v.share:
		// Counted as taken at once, so that one look takes no more than
		// the share (the next look reads what was won).
		v.mine = append(v.mine, partition)
		delete(v.free, partition)
		return true
	default:
		return f.since >= b.cfg.Grace
	}
}

// Keep says whether to keep leading partition: not when this coordinator
// holds more than its share while another holds fewer, for the highest
// of its partitions, one at a beat.
func (b *Balancer) Keep(partition int16) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := &b.view
	if !v.read || !v.below || len(v.mine) <= v.share || v.mine[len(v.mine)-1] != partition {
		return true
	}
	v.mine = v.mine[:len(v.mine)-1]
	v.below = false // one at a beat: the next look says whether more must go
	return false
}

// Yield gives up partition's lease if holder holds it: it runs out now,
// with no holder and the next epoch, so that a coordinator below its share
// takes it. The appends of the holder in progress end first (the lease's
// lock, as a takeover takes it), and any of its appends that comes after
// is refused by its epoch (an append checks the lease's time as of its
// transaction's start, which its epoch does not depend on). It says
// whether the holder held the lease.
func Yield(ctx context.Context, q Querier, partition int16, holder string, ttl time.Duration) (bool, error) {
	var yielded bool
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT set_config('lock_timeout', $1, true)", fmt.Sprint(ttl.Milliseconds()))
	b.Queue("SELECT pg_advisory_xact_lock($1, $2::int)", leaseLockClass, int32(partition))
	b.Queue(`UPDATE fairway_journal_lease SET holder = '', epoch = epoch + 1, until = now() WHERE partition = $1 AND holder = $2`, partition, holder).
		Exec(func(tag pgconn.CommandTag) error {
			yielded = tag.RowsAffected() == 1
			return nil
		})
	b.Queue("COMMIT")
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("giving up the lease of journal partition %d: %w", partition, err)
	}
	return yielded, nil
}
