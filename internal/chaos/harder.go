package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/pgserver"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// harderScenarios are the faults beyond crashes and restarts: a
// coordinator killed between ingest commit and ack with submissions that
// carry no id, a PostgreSQL failover, network partitions, full disks and
// a clock step.
func harderScenarios() []Scenario {
	base := ClusterOptions{NATSNodes: 1, Coordinators: 2, Executors: 3, PoolSize: 16}
	return []Scenario{
		killAfterIngestCommit(base),
		postgresFailover(base),
		partitionPostgresFailover(base),
		partitionKillLeader(base),
		partition("partition-coordinator", base, true),
		partition("partition-executor", base, false),
		fullDiskPostgres(base),
		fullDiskJetStream(base),
		clockStep(base),
	}
}

// ---- Exactly once per submission ----

const killHookEnv = "FAIRWAYCHAOS_KILL_AFTER_INGEST_COMMIT"

// killAfterIngestCommit: coordinator-1 SIGKILLs itself right after an
// ingest commit and before the ack (the fault hook in
// coordinator/chaoshook_fairwaychaos.go, in the binary Build makes with the
// build tag fairwaychaos), while submissions without an id in their
// body arrive, half with a Nats-Msg-Id header. JetStream redelivers the
// batch after the ack wait; each message must still make exactly one
// job, whose id is the header, else the one derived from the stream
// sequence.
func killAfterIngestCommit(base ClusterOptions) Scenario {
	opts := base
	opts.Coordinator = func(i int) ProcOptions {
		if i == 0 {
			return ProcOptions{Env: []string{killHookEnv + "=3"}}
		}
		return ProcOptions{}
	}
	return Scenario{
		Name: "kill-after-ingest-commit", Cluster: opts,
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			victim := r.C.Coordinators[0]
			for i := range repeats {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-victim.Done():
				}
				r.fault()
				code, _ := victim.Wait(0)
				hits := strings.Count(readFile(victim.log), "chaos: killed after an ingest commit")
				r.note("%s killed itself after an ingest commit, before the ack (exit %d; %d times so far)", victim.Name, code, hits)
				if hits != i+1 {
					return fmt.Errorf("%s exited (code %d) without the hook's log line: the window was not hit (log: %s)", victim.Name, code, victim.log)
				}
				if i+1 == repeats { // the last restart runs without the hook
					victim.env = withoutEnv(victim.env, killHookEnv)
				}
				if err := between(ctx, time.Second); err != nil {
					return err
				}
				if err := victim.Start(); err != nil {
					return err
				}
			}
			return nil
		},
		Submit: submitWithoutIDs,
		Check: func(r *Run, res Result) error {
			st := r.state.(*noIDState)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := r.C.DB(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			jobs, err := db.CountJobsWithPrefix(ctx, "")
			if err != nil {
				return err
			}
			r.note("%d messages without an id in the body (%d with Nats-Msg-Id), %d jobs; redelivered: %d", st.messages, st.withHeader, jobs, st.redelivered)
			if jobs != st.messages {
				return fmt.Errorf("%d messages made %d jobs, want exactly one each", st.messages, jobs)
			}
			if len(st.wrongID) > 0 {
				return fmt.Errorf("%d messages made a job whose id is not the documented one (Nats-Msg-Id, else derived from the stream sequence), e.g. %v", len(st.wrongID), st.wrongID[:min(3, len(st.wrongID))])
			}
			if st.redelivered == 0 {
				return errors.New("no message was delivered twice: the kill missed the window between commit and ack")
			}
			return nil
		},
	}
}

type noIDState struct {
	messages, withHeader int
	redelivered          int
	wrongID              []string
}

// sent is one acknowledged message without an id in its body.
type sent struct {
	msgID      string // Nats-Msg-Id, or ""
	stream     string
	seq        uint64
	from, till time.Time // the stream's timestamp lies between
	kind       kind
}

// submitWithoutIDs publishes size.Jobs submissions without an id (half
// with a Nats-Msg-Id header) over size.Duration, waits until ingest has
// stored and acknowledged them all, and finds each one's job.
func submitWithoutIDs(ctx context.Context, r *Run, size Size) (map[string]kind, error) {
	nc, err := nats.Connect(r.C.NATSURL(""), nats.Name("chaos-noid"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	subjects := events.NewSubjects("")
	const tick = 50 * time.Millisecond
	perTick := max(size.Jobs/max(int(size.Duration/tick), 1), 1)
	var msgs []sent
	st := &noIDState{}
	r.state = st
	for i := 0; i < size.Jobs; i += perTick {
		from := time.Now()
		var futures []jetstream.PubAckFuture
		var batch []sent
		for j := i; j < min(i+perTick, size.Jobs); j++ {
			k := mix[j%len(mix)]
			m := nats.NewMsg(subjects.Submit(fmt.Sprintf("tenant-%d", j%7), k.task))
			m.Data = []byte(`{"args":` + k.args + `}`)
			s := sent{kind: k}
			if j%2 == 0 {
				s.msgID = fairway.NewID()
				m.Header.Set(jetstream.MsgIDHeader, s.msgID)
				st.withHeader++
			}
			f, err := js.PublishMsgAsync(m)
			if err != nil {
				return nil, err
			}
			futures = append(futures, f)
			batch = append(batch, s)
		}
		for n, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Duplicate {
					return nil, fmt.Errorf("message %d acknowledged as a duplicate", i+n)
				}
				batch[n].stream, batch[n].seq = ack.Stream, ack.Sequence
			case err := <-f.Err():
				// Not retried: without a Nats-Msg-Id a second publish is a
				// second submission. No fault here touches NATS.
				return nil, fmt.Errorf("publishing: %w", err)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		till := time.Now()
		for n := range batch {
			batch[n].from, batch[n].till = from, till
		}
		msgs = append(msgs, batch...)
		if err := between(ctx, tick); err != nil {
			return nil, err
		}
	}
	st.messages = len(msgs)

	// Wait until ingest has nothing pending or unacknowledged: every
	// redelivery has been stored (or found stored) by then.
	stream, err := js.Stream(ctx, subjects.SubmitStream())
	if err != nil {
		return nil, err
	}
	for {
		// Each group has its consumer (see coordinator/sources.go).
		pending, deliveries, listed := 0, 0, 0
		consumers := stream.ListConsumers(ctx)
		for info := range consumers.Info() {
			listed++
			pending += int(info.NumPending) + info.NumAckPending //nolint:gosec // G115: a test stream's message counts, far below 2^63
			deliveries += int(info.Delivered.Consumer)           //nolint:gosec // G115: as above; every delivery, redeliveries too
		}
		// A work-queue stream is empty once every message is acknowledged
		// (a group whose consumer is not made yet still has its messages).
		info, err := stream.Info(ctx)
		if err == nil && info.State.Msgs == 0 && consumers.Err() == nil && listed > 0 && pending == 0 {
			// Every message was delivered once at least (the stream is
			// new): the rest are the redeliveries.
			st.redelivered = deliveries - len(msgs)
			break
		}
		if err := between(ctx, 250*time.Millisecond); err != nil { // JetStream has no "drained" event
			return nil, err
		}
	}

	db, err := r.C.DB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	jobs, err := db.AllJobAttempts(ctx)
	if err != nil {
		return nil, err
	}
	stored := map[string]bool{}
	bySuffix := map[string]string{} // bytes 6… of a UUID -> id
	for _, j := range jobs {
		id := j.ID
		stored[id] = true
		if u, err := uuid.Parse(id); err == nil {
			bySuffix[string(u[6:])] = id
		}
	}
	out := map[string]kind{}
	for _, m := range msgs {
		if m.msgID != "" {
			if !stored[m.msgID] {
				st.wrongID = append(st.wrongID, "Nats-Msg-Id "+m.msgID+": no job of that id")
			}
			out[m.msgID] = m.kind // lost if missing
			continue
		}
		want := derivedSuffix(m.stream, m.seq)
		id, ok := bySuffix[string(want[:])]
		if !ok {
			st.wrongID = append(st.wrongID, fmt.Sprintf("%s/%d: no job with the id derived from the sequence", m.stream, m.seq))
			out[fmt.Sprintf("missing-%s-%d", m.stream, m.seq)] = m.kind
			continue
		}
		u := uuid.MustParse(id)
		var ms int64
		for _, b := range u[:6] {
			ms = ms<<8 | int64(b)
		}
		if at := time.UnixMilli(ms); at.Before(m.from.Add(-time.Second)) || at.After(m.till.Add(time.Second)) {
			st.wrongID = append(st.wrongID, fmt.Sprintf("%s/%d: id %s has time %s, published between %s and %s", m.stream, m.seq, id, at, m.from, m.till))
		}
		out[id] = m.kind
	}
	return out, nil
}

// derivedSuffix is bytes 6… of the id README "Submit asynchronously"
// promises a body without an id and without a Nats-Msg-Id: a UUIDv7 whose
// first 6 bytes are the message's stream time in milliseconds and whose
// others come from sha256("<stream>/<sequence>").
func derivedSuffix(stream string, seq uint64) [10]byte {
	var u [16]byte
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", stream, seq))
	copy(u[6:], sum[:10])
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	return [10]byte(u[6:])
}

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// ---- PostgreSQL failover ----

// pgPair is a primary and its streaming replica.
type pgPair struct {
	primary, replica *pgserver.Server
	primaryDir       string
	replicaDir       string
	url              string // multi-host, target_session_attrs=read-write
}

// postgresFailover: the components use a multi-host URL to a primary and
// its synchronous streaming replica; the primary is SIGKILLed and the
// replica promoted under load.
func postgresFailover(base ClusterOptions) Scenario {
	return Scenario{
		Name: "postgres-failover", Cluster: base,
		Setup: func(ctx context.Context, r *Run, _ *ClusterOptions, _ string) (string, error) {
			p, err := startPGPair(ctx, r)
			if err != nil {
				return "", err
			}
			r.state = p
			return p.url, nil
		},
		Inject: killPrimaryAndPromote("the"),
	}
}

// killPrimaryAndPromote is the Inject of a scenario whose r.state is a
// pgPair: 2 s into the load it SIGKILLs the primary and promotes the
// replica, once (the old primary is not brought back as a replica);
// whose names the pair in the note.
func killPrimaryAndPromote(whose string) func(ctx context.Context, r *Run, _ int) error {
	return func(ctx context.Context, r *Run, _ int) error {
		p := r.state.(*pgPair)
		if err := between(ctx, 2*time.Second); err != nil {
			return err
		}
		r.fault()
		if err := killPostgres(p.primaryDir); err != nil {
			return err
		}
		killed := time.Now()
		if _, err := runAsPostgres(ctx, "pg_ctl", "-D", p.replicaDir, "-w", "promote"); err != nil {
			return err
		}
		r.note("%s primary SIGKILLed, its replica promoted in %s; 1 fault: one failover per run (the old primary is not brought back as a replica)", whose, time.Since(killed).Round(time.Millisecond))
		return nil
	}
}

// partitionPostgresFailover: the cluster has two partitions, the first
// in the suite's database, the second on a primary and its synchronous
// streaming replica (a multi-host URL); that primary is SIGKILLed and
// its replica promoted under load. The other partition's jobs go on; the
// second's resume on the promoted replica, each run once, none lost.
func partitionPostgresFailover(base ClusterOptions) Scenario {
	return Scenario{
		Name: "partition-postgres-failover", Cluster: base,
		Setup: func(ctx context.Context, r *Run, opts *ClusterOptions, dbURL string) (string, error) {
			p, err := startPGPair(ctx, r)
			if err != nil {
				return "", err
			}
			r.state = p
			env := []string{"FAIRWAY_DATABASE_PARTITIONS=2", "FAIRWAY_DATABASE_PARTITION_URLS=1=" + p.url}
			opts.Coordinator = func(int) ProcOptions { return ProcOptions{Env: env} }
			opts.PartitionURLs = []string{p.url}
			return dbURL, nil
		},
		Inject: killPrimaryAndPromote("partition 1's (partition 0 in the suite's database)"),
		// Each database holds jobs: the workload's groups fall in both
		// partitions, and the coordinators took the partitions as told.
		Check: func(r *Run, _ Result) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dbs, err := r.C.DBs(ctx)
			if err != nil {
				return err
			}
			defer dbs.Close()
			var held []int
			for _, db := range dbs {
				n, err := db.CountJobsWithPrefix(ctx, "")
				if err != nil {
					return err
				}
				held = append(held, n)
			}
			if len(held) != 2 || held[0] == 0 || held[1] == 0 {
				return fmt.Errorf("the jobs by database (the suite's, then the failed-over pair's): %v; each partition should hold some", held)
			}
			r.note("jobs by database: %d in partition 0's, %d in partition 1's (failed over)", held[0], held[1])
			return nil
		},
	}
}

func startPGPair(ctx context.Context, r *Run) (*pgPair, error) {
	p := &pgPair{primaryDir: filepath.Join(r.Dir, "pg-primary"), replicaDir: filepath.Join(r.Dir, "pg-replica")}
	for _, d := range []string{p.primaryDir, p.replicaDir, p.primaryDir + ".password"} {
		_ = os.RemoveAll(d)
	}
	primary, err := pgserver.Start(ctx, pgserver.Options{Dir: p.primaryDir, Database: "chaos"})
	if err != nil {
		return nil, err
	}
	p.primary = primary
	r.undo = append(r.undo, func() { _ = killPostgres(p.primaryDir) })
	pw, err := os.ReadFile(p.primaryDir + ".password")
	if err != nil {
		return nil, err
	}
	password := strings.TrimSpace(string(pw))
	if err := os.Mkdir(p.replicaDir, 0o700); err != nil {
		return nil, err
	}
	if err := chownPostgres(p.replicaDir); err != nil {
		return nil, err
	}
	// -R writes standby.signal and primary_conninfo.
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=fairway password=%s application_name=replica", primary.Port(), password)
	if _, err := runAsPostgres(ctx, "pg_basebackup", "-d", conninfo, "-D", p.replicaDir, "-R", "-X", "stream", "-c", "fast"); err != nil {
		return nil, err
	}
	replica, err := pgserver.Start(ctx, pgserver.Options{Dir: p.replicaDir, Database: "postgres", PasswordFile: p.primaryDir + ".password"})
	if err != nil {
		return nil, err
	}
	p.replica = replica
	r.undo = append(r.undo, func() { _ = killPostgres(p.replicaDir) })
	// Synchronous replication: a commit returns once the replica has
	// flushed its WAL (synchronous_commit = on, the default, with a
	// synchronous standby), so nothing acknowledged is lost with the
	// primary. Set now that the replica streams: earlier, commits would wait.
	conn, err := pgx.Connect(ctx, primary.URLFor("postgres"))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n); err != nil {
			return nil, err
		}
		if n > 0 {
			break
		}
		if err := between(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `ALTER SYSTEM SET synchronous_commit = 'on'`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return nil, err
		}
	}
	var syncState string
	for syncState != "sync" {
		if err := conn.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication LIMIT 1`).Scan(&syncState); err != nil {
			return nil, err
		}
		if err := between(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(primary.URLFor("chaos"))
	if err != nil {
		return nil, err
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", primary.Port(), replica.Port())
	u.RawQuery = "sslmode=disable&target_session_attrs=read-write"
	p.url = u.String()
	r.note("PostgreSQL primary :%d with a synchronous streaming replica :%d (synchronous_standby_names='*', synchronous_commit=on); URL hosts %s", primary.Port(), replica.Port(), u.Host)
	return p, nil
}

// killPostgres SIGKILLs the postmaster of the cluster in dir and its
// children (as a machine that dies would leave them: gone).
func killPostgres(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return nil // not running
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return nil
	}
	children := childrenOf(pid)
	if err := sigkill(pid); err != nil {
		return nil // already gone
	}
	for _, c := range children {
		_ = sigkill(c)
	}
	for range 100 { // wait until the postmaster is gone
		if !signalable(pid) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(pid) {
				out = append(out, n)
			}
		}
	}
	return out
}

// runAsPostgres runs a PostgreSQL binary as the postgres user when we are
// root (as pgserver does).
func runAsPostgres(ctx context.Context, name string, args ...string) (string, error) {
	binDir, err := pgserver.FindBinaries()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	cmd.Dir = "/"
	if ids, err := postgresIDs(); err != nil {
		return "", err
	} else if ids != nil {
		cmd.SysProcAttr = runAs(*ids)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// postgresIDs returns the postgres user's ids when we are root, else nil.
func postgresIDs() (*userIDs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	out, err := exec.Command("id", "-u", "postgres").Output()
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs a postgres user: %w", err)
	}
	uid, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the postgres user's uid: %w", err)
	}
	out, err = exec.Command("id", "-g", "postgres").Output()
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the postgres user's gid: %w", err)
	}
	return &userIDs{uid: uint32(uid), gid: uint32(gid)}, nil
}

func chownPostgres(path string) error {
	ids, err := postgresIDs()
	if err != nil || ids == nil {
		return err
	}
	return os.Chown(path, int(ids.uid), int(ids.gid))
}

// ---- Network partition ----

// partition cuts coordinator-1 (coordinator) or executor-1 off from NATS
// and PostgreSQL for two leases and more, then heals the partition.
func partition(name string, base ClusterOptions, coordinator bool) Scenario {
	opts := base
	return Scenario{
		Name: name, Cluster: opts,
		Setup: func(ctx context.Context, r *Run, opts *ClusterOptions, dbURL string) (string, error) {
			ns, err := NewNetns(ctx, "fwchaos-"+strings.TrimPrefix(name, "partition-"))
			if err != nil {
				return "", err
			}
			r.undo = append(r.undo, ns.Close)
			r.state = ns
			in := func(i int) ProcOptions {
				if i == 0 {
					return ProcOptions{Netns: ns}
				}
				return ProcOptions{}
			}
			if coordinator {
				opts.Coordinator = in
			} else {
				opts.Executor = in
			}
			return dbURL, nil
		},
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			ns := r.state.(*Netns)
			for range repeats {
				if coordinator {
					if err := between(ctx, 2*time.Second); err != nil {
						return err
					}
				} else if err := r.C.Trace.waitRunning(ctx, r.C.Executors[0].Name, "sleep", 1); err != nil {
					return err
				}
				r.fault()
				if err := ns.Cut(ctx); err != nil {
					return err
				}
				if err := between(ctx, 2*Lease+2*time.Second); err != nil {
					_ = ns.Heal(context.Background())
					return err
				}
				if err := ns.Heal(ctx); err != nil {
					return err
				}
			}
			return nil
		},
		Check: func(r *Run, _ Result) error {
			p := r.C.Executors[0]
			if coordinator {
				p = r.C.Coordinators[0]
			}
			if !p.Running() {
				return fmt.Errorf("%s exited during the partition (log: %s)", p.Name, p.log)
			}
			return nil
		},
	}
}

// ---- Full disk ----

// tmpfs mounts a size-limited tmpfs on dir.
func tmpfs(ctx context.Context, r *Run, dir, size string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("full disk needs a size-limited tmpfs (run as root): mount -t tmpfs -o size=%s tmpfs %s: %w: %s", size, dir, err, out)
	}
	r.undo = append(r.undo, func() { _ = exec.Command("umount", "-l", dir).Run() })
	return nil
}

func remount(ctx context.Context, dir, size string) error {
	if out, err := exec.CommandContext(ctx, "mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount -o remount,size=%s %s: %w: %s", size, dir, err, out)
	}
	return nil
}

// fill writes a file in dir until the file system is full; it returns
// the bytes written.
func fill(dir string) (int64, error) {
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }() // on a full disk the close may fail too: filling it was the point
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

type fullDisk struct {
	dir   string
	pg    *pgserver.Server
	pgDir string
}

// fullDiskPostgres: PostgreSQL's data directory is on a 192 MiB tmpfs
// that is filled under load, left full for 3 s, then grown to 512 MiB.
func fullDiskPostgres(base ClusterOptions) Scenario {
	return Scenario{
		Name: "full-disk-postgres", Cluster: base,
		Setup: func(ctx context.Context, r *Run, _ *ClusterOptions, _ string) (string, error) {
			fd := &fullDisk{dir: filepath.Join(r.Dir, "pgdisk")}
			if err := tmpfs(ctx, r, fd.dir, "192m"); err != nil {
				return "", err
			}
			fd.pgDir = filepath.Join(fd.dir, "pg")
			s, err := pgserver.Start(ctx, pgserver.Options{Dir: fd.pgDir, Database: "chaos"})
			if err != nil {
				return "", err
			}
			fd.pg = s
			r.undo = append(r.undo, func() { _ = killPostgres(fd.pgDir) })
			r.state = fd
			return s.URLFor("chaos"), nil
		},
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			fd := r.state.(*fullDisk)
			for i := range repeats {
				n, err := fillThenGrow(ctx, r, fd.dir, 512*(i+1))
				if err != nil {
					return err
				}
				running := postgresRunning(fd.pgDir)
				r.note("filled PostgreSQL's disk with %d MiB; after 3 s grown to %d MiB; PostgreSQL still running: %v; its log: %s", n>>20, 512*(i+1), running, grepLog(filepath.Join(fd.pgDir, "postgres.log"), "No space left"))
				if !running {
					// It died (a PANIC on a WAL write): an operator or the
					// service manager starts it again.
					s, err := pgserver.Start(ctx, pgserver.Options{Dir: fd.pgDir, Port: fd.pg.Port(), Database: "chaos"})
					if err != nil {
						return err
					}
					fd.pg = s
				}
			}
			return nil
		},
	}
}

// fillThenGrow is one full-disk fault: after 2 s it fills the file system
// at dir, leaves it full for 3 s, then grows it to growMiB, as an operator
// would. It returns how many bytes the filling took.
func fillThenGrow(ctx context.Context, r *Run, dir string, growMiB int) (int64, error) {
	if err := between(ctx, 2*time.Second); err != nil {
		return 0, err
	}
	r.fault()
	n, err := fill(dir)
	if err != nil {
		return 0, err
	}
	if err := between(ctx, 3*time.Second); err != nil {
		return 0, err
	}
	return n, remount(ctx, dir, fmt.Sprintf("%dm", growMiB))
}

// fullDiskJetStream: JetStream's store directory is on a 64 MiB tmpfs
// that is filled under load, left full for 3 s, then grown, and
// nats-server restarted (its stores stay failed until then).
func fullDiskJetStream(base ClusterOptions) Scenario {
	return Scenario{
		Name: "full-disk-jetstream", Cluster: base,
		Setup: func(ctx context.Context, r *Run, opts *ClusterOptions, dbURL string) (string, error) {
			fd := &fullDisk{dir: filepath.Join(r.Dir, "jsdisk")}
			if err := tmpfs(ctx, r, fd.dir, "64m"); err != nil {
				return "", err
			}
			opts.NATSStoreDir = filepath.Join(fd.dir, "jetstream")
			// JetStream reserves a stream's MaxBytes from its storage: on a
			// 64 MiB disk, the streams must be given limits that fit in it.
			opts.Coordinator = func(int) ProcOptions {
				return ProcOptions{Env: []string{"FAIRWAY_NATS_SUBMIT_MAX_BYTES=8MiB", "FAIRWAY_NATS_RESULTS_MAX_BYTES=8MiB",
					"FAIRWAY_NATS_EVENTS_MAX_BYTES=8MiB", "FAIRWAY_NATS_DEAD_MAX_BYTES=8MiB"}}
			}
			r.state = fd
			return dbURL, nil
		},
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			fd := r.state.(*fullDisk)
			for i := range repeats {
				n, err := fillThenGrow(ctx, r, fd.dir, 256*(i+1))
				if err != nil {
					return err
				}
				r.note("filled JetStream's disk with %d MiB; after 3 s grown to %d MiB; nats-server: %s", n>>20, 256*(i+1), grepLog(r.C.NATS[0].log, "Critical write error"))
				// A stream's store that failed a write refuses every later
				// write until nats-server restarts (nats-server 2.15's
				// filestore keeps the error), room or not: restart it, as
				// the operator must.
				if err := r.C.NATS[0].Signal(syscall.SIGTERM); err != nil {
					return err
				}
				if _, err := r.C.NATS[0].Wait(30 * time.Second); err != nil {
					return err
				}
				if err := r.C.RestartNATS(0); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func postgresRunning(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return err == nil && pid > 0 && signalable(pid)
}

// grepLog returns the first and the number of lines of a log holding s.
func grepLog(path, s string) string {
	var first string
	n := 0
	for _, l := range strings.Split(readFile(path), "\n") {
		if strings.Contains(l, s) {
			if n == 0 {
				first = l
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Sprintf("no line with %q", s)
	}
	return fmt.Sprintf("%d lines with %q, first: %s", n, s, first)
}

// ---- Clock step ----

const clockFileEnv = "FAIRWAYCHAOS_CLOCK_OFFSET_FILE"

// clockStep: coordinator-1's clock (coordinator.Config.HostClock, through the
// fault hook FAIRWAYCHAOS_CLOCK_OFFSET_FILE, read at every call, of the
// fairwaychaos build: internal/cli/chaosclock_fairwaychaos.go) jumps
// one hour ahead under load, and jumps again at each further fault.
// The journal's leader times the jobs by PostgreSQL's clock (each renewal
// of its lease reads now(), and the monotonic clock, which no step moves,
// counts from there: journal.Leader.Now) and
// periodic tasks follow PostgreSQL's now(), so jobs must be unaffected
// (none runs early, none waits an hour after a takeover) and the periodic
// task must keep its 2 s cadence.
func clockStep(base ClusterOptions) Scenario {
	var file string
	// The periodic task's next run and PostgreSQL's now() at the end of the
	// watch, read before the task is disabled (so that the accounting
	// afterwards sees a quiet cluster).
	var nextRun, dbNow time.Time
	opts := base
	return Scenario{
		Name: "clock-step", Cluster: opts,
		Setup: func(_ context.Context, r *Run, opts *ClusterOptions, dbURL string) (string, error) {
			file = filepath.Join(r.Dir, "clock-offset")
			if err := os.WriteFile(file, []byte("0s"), 0o644); err != nil {
				return "", err
			}
			opts.Coordinator = func(i int) ProcOptions {
				if i == 0 {
					return ProcOptions{Env: []string{clockFileEnv + "=" + file}}
				}
				return ProcOptions{}
			}
			return dbURL, nil
		},
		Inject: func(ctx context.Context, r *Run, repeats int) error {
			// A periodic task every 2 s, in a group of its own.
			nc, err := nats.Connect(r.C.NATSURL(""))
			if err != nil {
				return err
			}
			defer nc.Close()
			client, err := events.NewClient(nc, events.ClientOptions{})
			if err != nil {
				return err
			}
			if _, err := client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "every-2s", Enabled: true, Task: "echo", Group: "periodic", Timer: "*-*-* *:*:0/2"}); err != nil {
				return fmt.Errorf("saving a periodic task: %w", err)
			}
			for i := range repeats {
				if err := between(ctx, 3*time.Second); err != nil {
					return err
				}
				r.fault()
				if err := os.WriteFile(file, []byte(fmt.Sprintf("%dh", i+1)), 0o644); err != nil {
					return err
				}
			}
			// Watch the periodic task for a while after the last step.
			if err := between(ctx, 10*time.Second); err != nil {
				return err
			}
			db, err := r.C.DB(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			p, err := db.GetPeriodic(ctx, "every-2s")
			if err != nil {
				return err
			}
			if dbNow, err = db.Now(ctx); err != nil {
				return err
			}
			nextRun = p.NextRun
			_, err = client.SetPeriodic(ctx, "every-2s", false)
			return err
		},
		Check: func(r *Run, _ Result) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := r.C.DB(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			if log := r.C.Coordinators[0].log; !strings.Contains(readFile(log), "chaos: host clock offset") {
				return fmt.Errorf("%s never armed the clock hook (a fairway binary built without -tags fairwaychaos?): log %s", r.C.Coordinators[0].Name, log)
			}
			last := r.faults[len(r.faults)-1]
			before, after, err := db.CountSubmittedAround(ctx, "periodic", last)
			if err != nil {
				return err
			}
			r.note("periodic task every 2 s: %d runs before the last clock step, %d in the %s after it; its next run: %s, %s after PostgreSQL's now()", before, after, dbNow.Sub(last).Round(time.Second), nextRun.Format(time.RFC3339), nextRun.Sub(dbNow).Round(time.Second))
			if after == 0 {
				return errors.New("the periodic task stopped firing after the clock step")
			}
			if d := nextRun.Sub(dbNow); d > 3*time.Second || d < -10*time.Second {
				// Periodic tasks follow PostgreSQL's clock: a skewed
				// coordinator must neither push nextrun ahead nor let it lag.
				return fmt.Errorf("the periodic task's next run is %s from PostgreSQL's now(), want within its 2 s period: periodic tasks followed a skewed host clock", d.Round(time.Millisecond))
			}
			return nil
		},
	}
}
