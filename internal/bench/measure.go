package bench

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// usage is what measured phases cost: the CPU time of each process, the
// WAL PostgreSQL wrote, the transactions that wrote and committed, and the
// jobs worked meanwhile. A scenario of several cases adds theirs up.
type usage struct {
	jobs     int
	cpu      map[string]time.Duration // by cpuFigures name
	walBytes int64
	commits  int64
}

func (u *usage) add(o usage) {
	u.jobs += o.jobs
	u.walBytes += o.walBytes
	u.commits += o.commits
	for name, d := range o.cpu {
		if u.cpu == nil {
			u.cpu = map[string]time.Duration{}
		}
		u.cpu[name] += d
	}
}

// cpuFigures are the processes whose CPU time is measured, in the order
// of their keys (cpu_us_per_job_<name>): PostgreSQL (the postmaster and
// its children), the coordinator process, the NATS server process, the
// executor process (another language's, --executor), and
// the bench process (executors, submitters, event subscribers, and the
// coordinator and NATS server when they run in it).
var cpuFigures = []string{"pg", "coordinator", "nats", "executor", "bench"}

// figureNames are the names of cpu in cpuFigures' order, the more
// PostgreSQL servers' (pg_<k>, Options.PartitionServers) after pg.
func figureNames(cpu map[string]time.Duration) []string {
	var more []int
	for name := range cpu {
		if k, ok := strings.CutPrefix(name, "pg_"); ok {
			n, _ := strconv.Atoi(k)
			more = append(more, n)
		}
	}
	slices.Sort(more)
	names := slices.Clone(cpuFigures)
	for i, k := range more {
		names = slices.Insert(names, 1+i, pgFigure(k))
	}
	return names
}

// addUsage adds the per-job figures of u: cpu_us_per_job_<process> for
// each process measured and their total, wal_bytes_per_job and
// commits_per_job.
func (r *Result) addUsage(u usage) {
	if u.jobs == 0 {
		return
	}
	per := func(v float64) float64 { return math.Round(v/float64(u.jobs)*10) / 10 }
	var total time.Duration
	for _, name := range figureNames(u.cpu) {
		d, ok := u.cpu[name]
		if !ok {
			continue
		}
		total += d
		r.add("cpu_us_per_job_"+name, per(float64(d.Microseconds())))
	}
	r.add("cpu_us_per_job_total", per(float64(total.Microseconds())))
	r.add("wal_bytes_per_job", per(float64(u.walBytes)))
	r.add("commits_per_job", hundredths(math.Round(float64(u.commits)/float64(u.jobs)*100)/100))
}

// hundredths is a figure printed with two decimals (a share, or a count
// per job near 1), where one would hide most of it.
type hundredths float64

func (h hundredths) String() string { return strconv.FormatFloat(float64(h), 'f', 2, 64) }

// phase measures what a system spends between startPhase and stop: the
// CPU time of its processes (cpuSampler), the WAL written
// (pg_current_wal_insert_lsn before and after), and the transactions that
// wrote and committed.
//
// Commits are counted by transaction id, not by pg_stat_database's
// xact_commit: since PostgreSQL 15 a backend adds its counts to those
// statistics at most once a second, and one that goes idle keeps them up
// to 10 s (PGSTAT_IDLE_INTERVAL), so a difference of xact_commit taken
// around a phase of a few seconds misses a share of it that no short wait
// recovers. Instead, the transaction ids assigned during the phase (from
// pg_snapshot_xmax before to after) are checked one by one with
// pg_xact_status, at once and exactly: the count is of the transactions
// that wrote something and committed (each a WAL flush with
// synchronous_commit on); read-only transactions, which take no id and
// flush nothing, are not counted. Both figures are the whole server's:
// anything else that writes meanwhile (autovacuum's analyze, another
// database's clients) counts too.
type phase struct {
	cpu     cpuSampler
	servers []*serverProbe
}

// serverProbe is a phase's view of one PostgreSQL server: its WAL
// position and next transaction id when the phase started.
type serverProbe struct {
	conn *pgx.Conn
	lsn  string
	xmax int64
}

// startPhase starts measuring the system's processes and its PostgreSQL
// servers (the home one, and those of Options.PartitionServers).
func (s *system) startPhase(ctx context.Context) (*phase, error) {
	p := &phase{}
	if s.opts.postmaster != 0 {
		p.cpu.add("pg", processTreeCPU(s.opts.postmaster))
	}
	for k, pid := range s.opts.partPostmasters {
		if pid != 0 {
			p.cpu.add(pgFigure(k+1), processTreeCPU(pid))
		}
	}
	if s.coordPid != 0 {
		p.cpu.add("coordinator", processCPU(s.coordPid))
	}
	if s.natsPid != 0 {
		p.cpu.add("nats", processCPU(s.natsPid))
	}
	if s.execPid != 0 {
		p.cpu.add("executor", processCPU(s.execPid))
	}
	p.cpu.add("bench", selfCPU)
	seen := map[string]bool{}
	for _, url := range append([]string{s.dbURL}, s.partDBs...) {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		// The WAL and the transaction ids are a cluster's: one of several
		// databases on the same server is read once.
		server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		if seen[server] {
			continue
		}
		seen[server] = true
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		s.cleanup = append(s.cleanup, func() { conn.Close(context.Background()) })
		sp := &serverProbe{conn: conn}
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text, pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&sp.lsn, &sp.xmax); err != nil {
			return nil, fmt.Errorf("reading the WAL position: %w", err)
		}
		p.servers = append(p.servers, sp)
	}
	if err := p.cpu.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// stop ends the phase, in which jobs jobs were worked, and returns what it
// cost (the WAL and commits of every server added up).
func (p *phase) stop(ctx context.Context, jobs int) (usage, error) {
	cpu, err := p.cpu.Stop()
	if err != nil {
		return usage{}, err
	}
	u := usage{jobs: jobs, cpu: cpu}
	for _, sp := range p.servers {
		wal, commits, err := sp.stop(ctx)
		if err != nil {
			return usage{}, err
		}
		u.walBytes += wal
		u.commits += commits
	}
	return u, nil
}

func (sp *serverProbe) stop(ctx context.Context) (walBytes, commits int64, err error) {
	defer sp.conn.Close(context.Background())
	var xmax int64
	if err := sp.conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint, pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
		sp.lsn).Scan(&walBytes, &xmax); err != nil {
		return 0, 0, fmt.Errorf("reading the WAL position: %w", err)
	}
	// A transaction still running now (its id below xmax) is not counted.
	if err := sp.conn.QueryRow(ctx, `SELECT count(*) FROM generate_series($1::bigint, $2::bigint - 1) AS x
		WHERE pg_xact_status(x::text::xid8) = 'committed'`, sp.xmax, xmax).Scan(&commits); err != nil {
		return 0, 0, fmt.Errorf("counting the commits: %w", err)
	}
	return walBytes, commits, nil
}
