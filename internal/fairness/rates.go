package fairness

import (
	"math"
	"strings"
	"time"
)

// Rate limits: at most N job starts (claims) per period of a task across
// the cluster, of a group, or of a task in a group, as token buckets of
// N tokens refilled at N per period. A claim reads the limits with the
// concurrency limits and the buckets it needs under the fairness lock, and
// writes back those it took from before it commits, so every coordinator
// counts from the same buckets. A job whose bucket is empty is passed
// over like a job at its concurrency limit: the claim goes on to the next
// eligible job in fair order, and a slot is never left idle while another
// job it could run waits.

// RateLimit is one rate limit: starts per period of Task ("" any) in
// Group ("" the whole cluster, "*" each group without one of its own).
type RateLimit struct {
	Task, Group string
	Starts      float64
	Period      time.Duration
}

// Refilled is a bucket of l that held tokens, elapsed seconds later (a
// negative elapsed refills nothing): at most l.Starts.
func (l RateLimit) Refilled(tokens, elapsed float64) float64 {
	return math.Min(l.Starts, tokens+max(elapsed, 0)*l.Starts/l.Period.Seconds())
}

// Rates is what a claim knows of the rate limits: the limits, and the
// buckets it read (tokens now) or took from.
type Rates struct {
	task      map[string]RateLimit    // a task's, over the cluster
	group     map[string]RateLimit    // a group's ("*": each group's)
	taskGroup map[[2]string]RateLimit // a task's in a group (group "*": each group's)
	tokens    map[string]float64      // by bucket key, as of asof
	asof      map[string]time.Time    // when each bucket was read (PostgreSQL's clock)
	taken     map[string]bool         // buckets to write back
	// blocked: a job was passed over for a rate. The limits make a claim
	// find work later that no change will announce: the coordinators wake
	// the executors then (RateWait).
	blocked bool
}

// NewRates returns rates that know no limit yet.
func NewRates() *Rates {
	return &Rates{task: map[string]RateLimit{}, group: map[string]RateLimit{}, taskGroup: map[[2]string]RateLimit{},
		tokens: map[string]float64{}, asof: map[string]time.Time{}, taken: map[string]bool{}}
}

// Add records the rate limit l.
func (r *Rates) Add(l RateLimit) {
	switch {
	case l.Group == "":
		r.task[l.Task] = l
	case l.Task == "":
		r.group[l.Group] = l
	default:
		r.taskGroup[[2]string{l.Task, l.Group}] = l
	}
}

// Empty says whether there are no rate limits (r may be nil: none).
func (r *Rates) Empty() bool {
	return r == nil || len(r.task)+len(r.group)+len(r.taskGroup) == 0
}

// Applying returns the limits that count a job of task in group, with
// their buckets' keys: the task's, the group's (its own, or each
// group's), the task's in the group (its own, or in each group).
func (r *Rates) Applying(task, group string) (out [3]RateLimit, keys [3]string, n int) {
	if r.Empty() {
		return out, keys, 0
	}
	add := func(l RateLimit, key string) {
		out[n], keys[n] = l, key
		n++
	}
	if l, ok := r.task[task]; ok {
		add(l, "t:"+task)
	}
	if l, ok := r.group[group]; ok {
		add(l, "g:"+group)
	} else if l, ok := r.group[AnyGroup]; ok {
		add(l, "g:"+group)
	}
	if l, ok := r.taskGroup[[2]string{task, group}]; ok {
		add(l, "tg:"+task+":"+group)
	} else if l, ok := r.taskGroup[[2]string{task, AnyGroup}]; ok {
		add(l, "tg:"+task+":"+group)
	}
	return out, keys, n
}

// Unread returns the keys of the buckets that jobs of tasks in groups
// count against and that this claim has not read yet.
func (r *Rates) Unread(groups, tasks []string) []string {
	if r.Empty() {
		return nil
	}
	seen := map[string]bool{}
	var keys []string
	for _, g := range groups {
		for _, t := range tasks {
			_, ks, n := r.Applying(t, g)
			for _, k := range ks[:n] {
				if _, known := r.tokens[k]; !known && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// Read records bucket key as read at asof (PostgreSQL's clock): its
// tokens refilled over the elapsed seconds since they were written; a
// bucket never taken from (tokens or elapsed nil) is full.
func (r *Rates) Read(key string, tokens, elapsed *float64, asof time.Time) {
	l := r.LimitOfKey(key)
	r.asof[key] = asof
	if tokens == nil || elapsed == nil {
		r.tokens[key] = l.Starts
		return
	}
	r.tokens[key] = l.Refilled(*tokens, *elapsed)
}

// LimitOfKey is the limit whose bucket key is k.
func (r *Rates) LimitOfKey(k string) RateLimit {
	kind, rest, _ := strings.Cut(k, ":")
	switch kind {
	case "t":
		return r.task[rest]
	case "g":
		if l, ok := r.group[rest]; ok {
			return l
		}
		return r.group[AnyGroup]
	default:
		task, group, _ := strings.Cut(rest, ":")
		if l, ok := r.taskGroup[[2]string{task, group}]; ok {
			return l
		}
		return r.taskGroup[[2]string{task, AnyGroup}]
	}
}

// Allows says whether every bucket counting c has a token.
func (r *Rates) Allows(c Candidate) bool {
	_, keys, n := r.Applying(c.Task, c.Group)
	for _, k := range keys[:n] {
		if r.tokens[k] < 1 {
			r.blocked = true
			return false
		}
	}
	return true
}

// Blocked says whether the claim passed a job over for a rate (r may be
// nil: none): it may find work later that no change will announce.
func (r *Rates) Blocked() bool { return r != nil && r.blocked }

// Spent says whether the bucket key is known to be empty.
func (r *Rates) Spent(key string) bool {
	if r.Empty() {
		return false
	}
	tokens, known := r.tokens[key]
	return known && tokens < 1
}

// SpentGroups are the groups whose own bucket is empty: the walk steps
// over them.
func (r *Rates) SpentGroups() []string {
	if r.Empty() {
		return nil
	}
	var out []string
	for k, tokens := range r.tokens {
		if g, ok := strings.CutPrefix(k, "g:"); ok && tokens < 1 {
			out = append(out, g)
		}
	}
	return out
}

// Took takes a token of each bucket counting c.
func (r *Rates) Took(c Candidate) {
	_, keys, n := r.Applying(c.Task, c.Group)
	for _, k := range keys[:n] {
		r.tokens[k]--
		r.taken[k] = true
	}
}

// Taken returns the buckets taken from, with their tokens and when they
// were read: what to write back (r may be nil: none).
func (r *Rates) Taken() (keys []string, tokens []float64, asof []time.Time) {
	if r.Empty() || len(r.taken) == 0 {
		return nil, nil, nil
	}
	keys = make([]string, 0, len(r.taken))
	tokens = make([]float64, 0, len(r.taken))
	asof = make([]time.Time, 0, len(r.taken))
	for k := range r.taken {
		keys, tokens, asof = append(keys, k), append(tokens, r.tokens[k]), append(asof, r.asof[k])
	}
	return keys, tokens, asof
}

// Bucket is a rate limit's token bucket as a claim left it: its tokens as
// of At (microseconds since the Unix epoch).
type Bucket struct {
	Tokens float64
	At     int64
}

// RateBook is what the rate limits remember between claims in the
// journal's state: the limits (set by the leader's rate rows) and the
// buckets the claimed rows took from, each stamped with its row's time.
// Like Book, it is the fold of rows: every reader holds the same.
type RateBook struct {
	Limits  map[[2]string]RateLimit // by task and group
	Buckets map[string]Bucket       // by key (Rates.Applying); absent: full
}

// NewRateBook is a cluster without rate limits.
func NewRateBook() *RateBook {
	return &RateBook{Limits: map[[2]string]RateLimit{}, Buckets: map[string]Bucket{}}
}

// Set sets a rate limit, or removes it (Starts 0). Its buckets are left as
// they are: a lower limit caps them when they are next read.
func (b *RateBook) Set(l RateLimit) {
	if l.Starts <= 0 || l.Period <= 0 {
		delete(b.Limits, [2]string{l.Task, l.Group})
		return
	}
	b.Limits[[2]string{l.Task, l.Group}] = l
}

// Empty says whether no rate limit is set.
func (b *RateBook) Empty() bool { return len(b.Limits) == 0 }

// Rates returns a claim's rates over the book: its limits, and a bucket
// read (Read) as of now, in microseconds, whenever the claim first needs
// it (Unread, Fill). Nil when no rate limit is set.
func (b *RateBook) Rates() *Rates {
	if b.Empty() {
		return nil
	}
	r := NewRates()
	for _, l := range b.Limits {
		r.Add(l)
	}
	return r
}

// Fill reads into r the buckets of keys as of now (microseconds): each
// refilled since it was taken from, or full.
func (b *RateBook) Fill(r *Rates, keys []string, now int64) {
	for _, k := range keys {
		bk, ok := b.Buckets[k]
		if !ok {
			r.Read(k, nil, nil, time.UnixMicro(now))
			continue
		}
		elapsed := float64(now-bk.At) / 1e6
		r.Read(k, &bk.Tokens, &elapsed, time.UnixMicro(now))
	}
}

// TaskTokens is the tokens of task's rate over the cluster (the bucket
// of a RateLimit of Group "") as of now (microseconds), and that limit;
// ok false when the task has none.
func (b *RateBook) TaskTokens(task string, now int64) (tokens float64, l RateLimit, ok bool) {
	if l, ok = b.Limits[[2]string{task, ""}]; !ok {
		return 0, l, false
	}
	tokens = l.Starts
	if bk, in := b.Buckets["t:"+task]; in {
		tokens = l.Refilled(bk.Tokens, float64(now-bk.At)/1e6)
	}
	return tokens, l, true
}

// Started is a job of Task in Group that a claimed row started.
type Started struct{ Task, Group string }

// Take takes a token from each bucket that counts each of jobs, which a
// claimed row started at (microseconds): refilled to at, then one less.
// A bucket may go below zero (a claim read it on a leader's clock ahead
// of PostgreSQL's, which stamps the row): the next claims wait the
// longer.
func (b *RateBook) Take(jobs []Started, at int64) {
	if b.Empty() || len(jobs) == 0 {
		return
	}
	r := b.Rates()
	for _, j := range jobs {
		limits, keys, n := r.Applying(j.Task, j.Group)
		for i, k := range keys[:n] {
			l := limits[i]
			tokens := l.Starts
			if bk, ok := b.Buckets[k]; ok {
				tokens = l.Refilled(bk.Tokens, float64(at-bk.At)/1e6)
			}
			b.Buckets[k] = Bucket{Tokens: tokens - 1, At: at}
		}
	}
}
