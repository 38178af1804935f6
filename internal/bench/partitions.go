package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/jackc/pgx/v5"
)

// partitionScenarios are the scenarios that run on a cluster of several
// partitions (Options.Partitions): those that reach Fairway only through
// NATS, and failover (the coordinator leading every partition killed).
// The others write the home database directly (scale, history), or
// measure what a partition does not share (features' limits are per
// partition).
var partitionScenarios = []string{"drain", "latency", "steady", "fairness", "short-jobs", "ingest", "shares", "partition-down", "failover"}

// allScenarios are those "all" runs: with one partition every one but
// partition-down; with several, those that run on them (partition-down
// with a second server to take down).
func (o Options) allScenarios() []string {
	var out []string
	for _, name := range Scenarios {
		switch {
		case o.Partitions <= 1 && name != "partition-down",
			o.Partitions > 1 && slices.Contains(partitionScenarios, name) && (name != "partition-down" || len(o.PartitionServers) > 0):
			out = append(out, name)
		}
	}
	return out
}

// checkPartitions refuses what a run of several partitions cannot do.
func (o Options) checkPartitions(names []string) error {
	if o.Partitions <= 1 {
		if len(o.PartitionServers) > 0 {
			return fmt.Errorf("more PostgreSQL servers (%d) need --partitions above 1 to hold any partition", len(o.PartitionServers))
		}
		return nil
	}
	if err := partition.Check(o.Partitions); err != nil {
		return fmt.Errorf("--partitions: %w", err)
	}
	if len(o.CoordinatorCommand) == 0 {
		return fmt.Errorf("--partitions runs the coordinator in a process of its own (drop --in-process)")
	}
	if servers := 1 + len(o.PartitionServers); servers > o.Partitions {
		return fmt.Errorf("%d PostgreSQL servers for %d partitions: some would hold none; use at most %d servers", servers, o.Partitions, o.Partitions)
	}
	for _, name := range names {
		if !slices.Contains(partitionScenarios, name) {
			return fmt.Errorf("scenario %s runs on one partition only (with --partitions: %s)", name, strings.Join(partitionScenarios, ", "))
		}
	}
	return nil
}

// partitionServer is the server of partition p: 0 is ServerURL, k the
// k-th of PartitionServers (round robin, so that each holds about P/N).
func (o Options) partitionServer(p int) int { return p % (1 + len(o.PartitionServers)) }

// createPartitionDatabases makes the scenario's database on each more
// server, and gives the coordinator the partitions' layout in its
// environment (database.partitions, database.partition-urls).
func (s *system) createPartitionDatabases(ctx context.Context) error {
	if s.opts.Partitions <= 1 {
		return nil
	}
	s.partDBs = nil
	for _, server := range s.opts.PartitionServers {
		url, drop, err := createDatabase(ctx, server)
		if err != nil {
			return fmt.Errorf("partition server %s: %w", server, err)
		}
		s.cleanup = append(s.cleanup, drop)
		s.partDBs = append(s.partDBs, url)
	}
	urls := map[int]string{}
	for p := range s.opts.Partitions {
		if k := s.opts.partitionServer(p); k > 0 {
			urls[p] = s.partDBs[k-1]
		}
	}
	s.coordEnv = append(s.coordEnv, "FAIRWAY_DATABASE_PARTITIONS="+strconv.Itoa(s.opts.Partitions),
		"FAIRWAY_DATABASE_PARTITION_URLS="+partition.FormatURLs(urls))
	return nil
}

// pgFigure names the CPU figure of PostgreSQL server k: pg for the home
// server, pg_<k> for the others.
func pgFigure(k int) string {
	if k == 0 {
		return "pg"
	}
	return "pg_" + strconv.Itoa(k)
}

// findPartitionPostmasters finds the postmaster of each more server, for
// their CPU figures (0 where it does not run on this machine).
func (o *Options) findPartitionPostmasters(ctx context.Context) string {
	o.partPostmasters = nil
	var said []string
	for k, url := range o.PartitionServers {
		pid, why := findPostmaster(ctx, url)
		if pid != 0 && (pid == o.postmaster || slices.Contains(o.partPostmasters, pid)) {
			// Another database of a cluster measured already.
			said = append(said, fmt.Sprintf("no cpu_us_per_job_%s: postmaster %d is measured already", pgFigure(k+1), pid))
			pid = 0
		}
		o.partPostmasters = append(o.partPostmasters, pid)
		if pid != 0 {
			said = append(said, fmt.Sprintf("cpu_us_per_job_%s: postmaster %d and its children", pgFigure(k+1), pid))
		} else if why != "" {
			said = append(said, fmt.Sprintf("no cpu_us_per_job_%s: %s", pgFigure(k+1), why))
		}
	}
	return strings.Join(said, "; ")
}

// addJobsPerServer adds, with several servers, how many jobs each
// server's database holds (jobs_on_<pg figure>): where the partitions put
// them.
func (s *system) addJobsPerServer(ctx context.Context, r *Result) error {
	if len(s.partDBs) == 0 {
		return nil
	}
	for k, url := range append([]string{s.dbURL}, s.partDBs...) {
		st, err := store.Open(ctx, url, store.Options{MaxConns: 1})
		if err != nil {
			return err
		}
		n, err := st.CountJobsWithPrefix(ctx, "")
		st.Close()
		if err != nil {
			return fmt.Errorf("counting the jobs of %s: %w", pgFigure(k), err)
		}
		r.add("jobs_on_"+pgFigure(k), n)
	}
	return nil
}

// partitionDown: --rate jobs a second over the drain's ten groups for
// --duration, in three equal parts: all databases up; the last server's
// database (or --down-cluster's: 1 is the home's) refusing every
// connection (its open ones cut, as a primary down); up again. It
// measures the other partitions' successes a second in the first two
// parts (their dip), how long the downed partitions' first success took
// after it came back, and that every job succeeded, each run once.
func partitionDown(ctx context.Context, opts Options) (*Result, error) {
	if opts.Partitions <= 1 || len(opts.PartitionServers) == 0 {
		return nil, fmt.Errorf("scenario partition-down takes a server down: it needs --partitions 2 or more over --pg-clusters 2 or more")
	}
	s, err := newSystem(ctx, opts, systemConfig{slots: opts.Slots})
	if err != nil {
		return nil, err
	}
	defer s.close()
	down := len(opts.PartitionServers) // the server's index: 0 the home's
	if opts.DownCluster != 0 {
		if opts.DownCluster < 1 || opts.DownCluster > 1+len(opts.PartitionServers) {
			return nil, fmt.Errorf("--down-cluster %d: the clusters are 1 (the home database's) to %d", opts.DownCluster, 1+len(opts.PartitionServers))
		}
		down = opts.DownCluster - 1
	}
	downGroup := func(g string) bool { return opts.partitionServer(partition.Of(g, opts.Partitions)) == down }
	serverURL, downDB := opts.ServerURL, s.dbURL
	if down > 0 {
		serverURL, downDB = opts.PartitionServers[down-1], s.partDBs[down-1]
	}
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	dbName := ""
	if cfg, err := pgx.ParseConfig(downDB); err == nil {
		dbName = cfg.Database
	}
	setDown := func(off bool) error {
		if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS %t`, dbName, !off)); err != nil {
			return fmt.Errorf("taking the database %s down (%t): %w", dbName, off, err)
		}
		// Until none is left: a connection being made as the database
		// closed may outlive one round of terminations.
		for off {
			var left int
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1`, dbName).Scan(&left); err != nil || left == 0 {
				return err
			}
			time.Sleep(10 * time.Millisecond) // polling the server's state: no event says a backend ended
		}
		return nil
	}
	defer func() { _ = setDown(false) }()

	const tick = 10 * time.Millisecond
	perTick := max(opts.Rate*int(tick)/int(time.Second), 1)
	ticks := int(opts.Duration / tick)
	third := ticks / 3
	start := time.Now()
	var wentDown, cameBack time.Time
	next := start
	downJobs := 0
	groupOf := map[string]string{}
	for t := range ticks {
		switch t {
		case third:
			if err := setDown(true); err != nil {
				return nil, err
			}
			wentDown = time.Now()
		case 2 * third:
			if err := setDown(false); err != nil {
				return nil, err
			}
			cameBack = time.Now()
		}
		subs := submissions(perTick, func(i int) string { return fmt.Sprintf("g%d", (t*perTick+i)%10) })
		for _, sub := range subs {
			if downGroup(sub.Group) {
				downJobs++
			}
		}
		ids, err := s.client.SubmitMany(ctx, subs)
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			groupOf[id] = subs[i].Group
		}
		next = next.Add(tick)
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // pacing the load generator, not synchronisation
		}
	}
	total := perTick * ticks
	// Until every job succeeded: a job run twice sends its success twice.
	var arrivals []arrival
	unique := map[string]bool{}
	deadline := time.After(5 * time.Minute)
	for len(unique) < total {
		select {
		case a := <-s.finished:
			arrivals = append(arrivals, a)
			unique[a.ev.JobID] = true
		case <-deadline:
			return nil, fmt.Errorf("only %d of %d jobs succeeded within 5 minutes; %s", len(unique), total, s.missing(ctx, groupOf, unique))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	others := func(from, to time.Time) float64 {
		n := 0
		for _, a := range arrivals {
			if !downGroup(a.ev.Group) && !a.at.Before(from) && a.at.Before(to) {
				n++
			}
		}
		return float64(n) / to.Sub(from).Seconds()
	}
	// The first half second of each part is left out: the runs of the part
	// before still end in it.
	settle := 500 * time.Millisecond
	before, during := others(start.Add(settle), wentDown), others(wentDown.Add(settle), cameBack)
	resumed := time.Duration(0)
	for _, a := range arrivals {
		if downGroup(a.ev.Group) && a.at.After(cameBack) && (resumed == 0 || a.at.Sub(cameBack) < resumed) {
			resumed = a.at.Sub(cameBack)
		}
	}
	twice := map[string]int{}
	for _, a := range arrivals {
		twice[a.ev.Group]++
	}
	s.opts.Logger.Info("bench: successes by group", "counts", fmt.Sprint(twice))
	// Second by second from the start, the other partitions' successes
	// and the downed ones': where a dip is, and how it ends.
	var othersBySecond, downBySecond []int
	for _, a := range arrivals {
		k := int(a.at.Sub(start) / time.Second)
		for len(othersBySecond) <= k {
			othersBySecond, downBySecond = append(othersBySecond, 0), append(downBySecond, 0)
		}
		if downGroup(a.ev.Group) {
			downBySecond[k]++
		} else {
			othersBySecond[k]++
		}
	}
	s.opts.Logger.Info("bench: successes a second", "others", fmt.Sprint(othersBySecond), "downed", fmt.Sprint(downBySecond),
		"down_from_s", wentDown.Sub(start).Seconds(), "up_from_s", cameBack.Sub(start).Seconds())
	r := &Result{Scenario: "partition-down", Jobs: total}
	r.add("down_share_pct", math.Round(float64(downJobs)/float64(total)*1000)/10)
	r.add("others_jobs_per_s_up", before)
	r.add("others_jobs_per_s_down", during)
	r.add("others_dip_pct", math.Round((1-during/before)*1000)/10)
	r.add("down_resume_ms", float64(resumed.Microseconds())/1000)
	r.add("succeeded", len(unique))
	r.add("successes_beyond_one", len(arrivals)-len(unique))
	r.add("runs_beyond_one", s.ran.Load()-int64(len(unique)))
	return r, nil
}

// missing says what became of the jobs submitted (id → group) that have
// not succeeded: the state of the first few, as the API reports it.
func (s *system) missing(ctx context.Context, groupOf map[string]string, succeeded map[string]bool) string {
	var ids []string
	for id := range groupOf {
		if !succeeded[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var b strings.Builder
	fmt.Fprintf(&b, "%d not succeeded:", len(ids))
	for _, id := range ids[:min(len(ids), 20)] {
		j, err := s.client.Get(ctx, groupOf[id], id)
		switch {
		case err != nil:
			fmt.Fprintf(&b, " %s (%s): %v;", id, groupOf[id], err)
		default:
			fmt.Fprintf(&b, " %s (%s): %s, attempt %d, executor %q;", id, groupOf[id], j.State, j.Attempt, j.Executor)
		}
	}
	return b.String()
}
