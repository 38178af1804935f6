package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// clusterLead says which coordinator leads the cluster: it answers the
// executors' dispatch requests and applies their reports, takes the
// journal's partitions' leases as they free (followCluster) and serves
// the API requests the others forward. It is a key in a JetStream
// key-value bucket of the coordinators' own, whose messages live
// clusterLeadTTL: the leader writes it again every clusterLeadRenew
// (compare-and-set on its revision), and when it stops being written
// (the leader died, or is cut off from NATS) it is gone within the TTL
// and another coordinator creates it.
//
// It used to be partition 0's lease, in partition 0's database: while that
// database was down (the home's primary, by default), its leader lost the
// lease and gave every other partition up, and no partition was led
// (operations.md, "A partition's database down"). The key decides only
// who should lead: each partition's lease, in its own database, still
// fences its leader's writes (journal.Leader), so two coordinators that
// both take themselves for the cluster's leader for a moment (a NATS
// partition) cannot both write a partition.
type clusterLead struct {
	js       jetstream.JetStream
	bucket   string
	holder   string
	replicas int
	log      *slog.Logger
	// changed is called when this coordinator comes to lead the cluster
	// (true) or stops (false), from the lead's loop.
	changed func(leads bool)

	// leads says this coordinator holds the key; othersLead that another
	// did at the last read (neither: no holder was read, or the key could
	// not be read).
	leads, othersLead atomic.Bool

	mu  sync.Mutex // the loop's state (try), stopLeading's and release's
	kv  jetstream.KeyValue
	rev uint64
	// missing counts the reads in a row that found no holder, and
	// lastHolder is the holder last read: while that one still beats
	// (alive: it is heard on the coordinators' beat), a coordinator
	// creates the key only at its second read without a holder, so that
	// the leader whose key ran out while NATS could not be written (a
	// restart, an election) writes it again first; a leader not heard
	// (dead) is followed at the first.
	missing    int
	lastHolder string
	alive      func(holder string) bool
	// failedLog is when a failure to reach the bucket was last logged.
	failedLog time.Time
	// held says this coordinator wrote the key last (at rev); stopped
	// that it stopped (stopLeading): it tries no more.
	held, stopped bool
}

const (
	// clusterLeadKey is the key's name in the bucket.
	clusterLeadKey = "leader"
	// clusterLeadTTL is how long the key lives unwritten (the journal
	// leases' TTL); clusterLeadRenew how often the leader writes it and
	// the others read it.
	clusterLeadTTL   = 1500 * time.Millisecond
	clusterLeadRenew = 500 * time.Millisecond
)

// followCluster is the partitions' leases' balance: the cluster's leader
// takes each lease as it frees; a coordinator keeps a lease until another
// leads the cluster (a coordinator that cannot read the key, NATS away,
// keeps what it leads: the lease fences it all the same).
type followCluster struct{ lead *clusterLead }

func (f followCluster) Take(int16) bool { return f.lead.leads.Load() }
func (f followCluster) Keep(int16) bool { return !f.lead.othersLead.Load() }

// run tries to take or keep the key every clusterLeadRenew until ctx
// ends.
func (cl *clusterLead) run(ctx context.Context) {
	t := time.NewTicker(clusterLeadRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cl.try(ctx)
		}
	}
}

// try writes the key again if this coordinator holds it, else reads it:
// it creates the key found missing (at the second such read while the
// last holder still beats), and takes one given up.
func (cl *clusterLead) try(ctx context.Context) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.stopped {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, clusterLeadRenew)
	defer cancel()
	if cl.kv == nil {
		kv, err := cl.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      cl.bucket,
			Description: "Fairway: which coordinator leads the cluster (dispatch, reports, the partitions' leases)",
			TTL:         clusterLeadTTL,
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    cl.replicas,
		})
		if err != nil {
			cl.failed("opening the cluster's lead bucket", err)
			return
		}
		cl.kv = kv
	}
	if cl.leads.Load() {
		rev, err := cl.kv.Update(ctx, clusterLeadKey, []byte(cl.holder), cl.rev)
		if err == nil {
			cl.rev = rev
			return
		}
		cl.held = false
		if !errors.Is(err, jetstream.ErrKeyExists) {
			// NATS did not answer: the key may run out meanwhile, and
			// whoever creates it then leads; until this coordinator reads
			// so, it keeps leading (the leases fence it).
			cl.failed("writing the cluster's lead", err)
			return
		}
		// Changed under it: it ran out and was created again, by another
		// or by a try of this one's.
	}
	entry, err := cl.kv.Get(ctx, clusterLeadKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		cl.othersLead.Store(false)
		if cl.missing++; cl.missing < 2 && !cl.leads.Load() && cl.lastHolder != "" && cl.alive != nil && cl.alive(cl.lastHolder) {
			return
		}
		cl.took(cl.kv.Create(ctx, clusterLeadKey, []byte(cl.holder)))
	case errors.Is(err, jetstream.ErrBucketNotFound):
		cl.kv = nil // removed: made again at the next try
	case err != nil:
		cl.failed("reading the cluster's lead", err)
	case len(entry.Value()) == 0: // given up at a stop (release): taken at once
		cl.othersLead.Store(false)
		cl.took(cl.kv.Update(ctx, clusterLeadKey, []byte(cl.holder), entry.Revision()))
	case string(entry.Value()) == cl.holder:
		cl.rev, cl.held = entry.Revision(), true
		cl.set(true)
	default:
		cl.missing, cl.lastHolder, cl.held = 0, string(entry.Value()), false
		cl.othersLead.Store(true)
		cl.set(false)
	}
}

// took applies the answer to a try to take the key (created, or updated
// from a holder given up): this coordinator leads, or another was first
// (read at the next try), or NATS did not answer. Called with cl.mu held.
func (cl *clusterLead) took(rev uint64, err error) {
	switch {
	case err == nil:
		cl.rev, cl.held = rev, true
		cl.set(true)
	case errors.Is(err, jetstream.ErrKeyExists):
	default:
		cl.failed("taking the cluster's lead", err)
	}
}

// set records whether this coordinator leads, and tells changed when
// that changes. Called with cl.mu held.
func (cl *clusterLead) set(leads bool) {
	if leads {
		cl.missing = 0
		cl.othersLead.Store(false)
	}
	if cl.leads.Swap(leads) == leads {
		return
	}
	if leads {
		cl.log.Info("this coordinator leads the cluster now: it answers dispatch requests and reports, and takes the partitions' leases")
	} else if cl.stopped {
		cl.log.Info("this coordinator no longer leads the cluster: it stops")
	} else {
		cl.log.Info("another coordinator leads the cluster now")
	}
	if cl.changed != nil {
		cl.changed(leads)
	}
}

// failed logs a failure to reach the bucket, at most once every ten
// seconds. Called with cl.mu held.
func (cl *clusterLead) failed(what string, err error) {
	if time.Since(cl.failedLog) < 10*time.Second {
		return
	}
	cl.failedLog = time.Now()
	cl.log.Warn(what+": NATS did not answer; this coordinator keeps what it leads, and tries again every half second", "error", err)
}

// stopLeading stops this coordinator leading the cluster at a stop: it
// serves no more (changed), and tries no more to lead. The key stays its
// own until release, so that another takes the lead once the partitions'
// leases are given up.
func (cl *clusterLead) stopLeading() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.stopped = true
	cl.set(false)
}

// release gives the key up after stopLeading, so that another coordinator
// takes the lead at its next read rather than once the key runs out: the
// key stays, without a holder, which the next to read it takes at once.
func (cl *clusterLead) release(ctx context.Context) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.kv == nil || cl.rev == 0 || !cl.held {
		return
	}
	if _, err := cl.kv.Update(ctx, clusterLeadKey, nil, cl.rev); err != nil {
		cl.log.Warn("giving the cluster's lead up; another coordinator takes it once it runs out", "error", err)
	}
	cl.held = false
}
