package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/jackc/pgx/v5"
)

// partitionScenarios are the scenarios that run on a cluster of several
// partitions (Options.Partitions): those that reach Fairway only through
// NATS. The others write the home database directly (scale, history), or
// kill the one leader (failover), or measure what a partition does not
// share (features' limits are per partition).
var partitionScenarios = []string{"drain", "latency", "steady", "fairness", "short-jobs", "ingest", "shares"}

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
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		var n int64
		err = conn.QueryRow(ctx, "SELECT count(*) FROM fairway_job").Scan(&n)
		conn.Close(context.Background())
		if err != nil {
			return fmt.Errorf("counting the jobs of %s: %w", pgFigure(k), err)
		}
		r.add("jobs_on_"+pgFigure(k), n)
	}
	return nil
}
