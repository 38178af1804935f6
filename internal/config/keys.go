package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/fairwayhq/fairway/internal/secret"
)

// key is one row of the key table. The table drives defaults, environment
// variable names, flags, validation and Print.
type key struct {
	name   string // koanf path, e.g. "scheduler.pool-size"
	flag   string // flag name without dashes
	def    string // default, in the same syntax a user would write
	help   string
	secret secrecy
	binding
}

// secrecy says how Print and error messages show a key's value.
type secrecy int

const (
	public        secrecy = iota
	embedsSecrets         // a URL or connection string: its passwords and tokens are masked (secret.Mask)
	secretValue           // the whole value is a secret: shown as **** when set
)

// masked returns v as Print and error messages may show it.
func (k *key) masked(v string) string {
	switch {
	case k.secret == embedsSecrets:
		return secret.Mask(v)
	case k.secret == secretValue && v != "":
		return mask
	}
	return v
}

// binding parses a raw value into its Config field and formats it back.
type binding struct {
	typ string // type name shown in flag help
	set func(c *Config, s string) error
	get func(c *Config) string
}

var keys = []key{
	{name: "log.level", flag: "log-level", def: "info", help: "log level: debug, info, warn or error",
		binding: stringVar(func(c *Config) *string { return &c.Log.Level }, oneOf("debug", "info", "warn", "error"))},
	{name: "log.format", flag: "log-format", def: "auto", help: "log format: auto (coloured text on a terminal, else JSON), text or json",
		binding: stringVar(func(c *Config) *string { return &c.Log.Format }, oneOf("auto", "text", "json"))},
	{name: "nats.url", flag: "nats-url", def: "nats://127.0.0.1:4222", help: "NATS server URL(s), comma-separated; user:password@ or token@ in a URL authenticates", secret: embedsSecrets,
		binding: stringVar(func(c *Config) *string { return &c.NATS.URL }, natsURL)},
	{name: "nats.creds", flag: "creds", def: "", help: "NATS credentials file (.creds: user JWT and nkey seed)",
		binding: stringVar(func(c *Config) *string { return &c.NATS.Creds }, optional(credsFile))},
	{name: "nats.nkey", flag: "nkey", def: "", help: "file holding the nkey seed (SU...) to authenticate to NATS with",
		binding: stringVar(func(c *Config) *string { return &c.NATS.NKey }, optional(nkeySeedFile))},
	{name: "nats.user", flag: "user", def: "", help: "NATS user name (with nats.password)",
		binding: stringVar(func(c *Config) *string { return &c.NATS.User }, anything)},
	{name: "nats.password", flag: "password", def: "", help: "NATS password of nats.user (prefer env FAIRWAY_NATS_PASSWORD: other users can read command lines)", secret: secretValue,
		binding: stringVar(func(c *Config) *string { return &c.NATS.Password }, anything)},
	{name: "nats.token", flag: "token", def: "", help: "NATS authentication token (prefer env FAIRWAY_NATS_TOKEN: other users can read command lines)", secret: secretValue,
		binding: stringVar(func(c *Config) *string { return &c.NATS.Token }, anything)},
	{name: "nats.tls-ca", flag: "tls-ca", def: "", help: "PEM file of the CA certificate(s) that NATS server certificates are verified against (implies TLS)",
		binding: stringVar(func(c *Config) *string { return &c.NATS.TLSCA }, optional(caFile))},
	{name: "nats.tls-cert", flag: "tls-cert", def: "", help: "PEM client certificate presented to NATS (mTLS; with nats.tls-key)",
		binding: stringVar(func(c *Config) *string { return &c.NATS.TLSCert }, optional(readableFile))},
	{name: "nats.tls-key", flag: "tls-key", def: "", help: "PEM private key of nats.tls-cert",
		binding: stringVar(func(c *Config) *string { return &c.NATS.TLSKey }, optional(readableFile))},
	{name: "nats.prefix", flag: "prefix", def: "fairway", help: "NATS subject prefix (letters, digits, - and _)",
		binding: stringVar(func(c *Config) *string { return &c.NATS.Prefix }, token)},
	{name: "nats.replicas", flag: "replicas", def: "1", help: "copies JetStream keeps of each Fairway stream (3 in a three-server NATS cluster; 1 on a single server)",
		binding: intVar(func(c *Config) *int { return &c.NATS.Replicas }, 1, 5)},
	{name: "nats.submit-max-bytes", flag: "submit-max-bytes", def: "1GiB", help: "size of the submissions stream FAIRWAY_SUBMIT; when full, JetStream refuses new submissions",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.SubmitMaxBytes })},
	{name: "nats.submit-max-msgs", flag: "submit-max-msgs", def: "10000000", help: "submissions the stream FAIRWAY_SUBMIT holds; when full, JetStream refuses new submissions",
		binding: int64Var(func(c *Config) *int64 { return &c.Coordinator.SubmitMaxMsgs })},
	{name: "nats.results-max-bytes", flag: "results-max-bytes", def: "1GiB", help: "size of the executor reports stream FAIRWAY_RESULTS; when full, JetStream refuses new reports (executors send them again)",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.ResultsMaxBytes })},
	{name: "nats.executor-results-max-bytes", flag: "executor-results-max-bytes", def: "64MiB", help: "size of each executor's own reports stream FAIRWAY_RESULTS_E_<app-id> (operator mode); when full, JetStream refuses that executor's new reports (it sends them again) and no other's",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.ExecutorResultsMaxBytes })},
	{name: "nats.events-max-bytes", flag: "events-max-bytes", def: "4GiB", help: "size of the events stream FAIRWAY_EVENTS (kept 7 days); when full, the oldest events go",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.EventsMaxBytes })},
	{name: "nats.dead-max-bytes", flag: "dead-max-bytes", def: "256MiB", help: "size of the dead-letter stream FAIRWAY_DEAD; when full, the oldest dead letters go",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.DeadMaxBytes })},
	{name: "nats.dead-max-age", flag: "dead-max-age", def: "720h", help: "how long dead letters are kept",
		binding: durationVar(func(c *Config) *time.Duration { return &c.Coordinator.DeadMaxAge })},
	{name: "database.url", flag: "database-url", def: "", help: "PostgreSQL connection URL or keyword/value string (TLS: sslmode=verify-full&sslrootcert=FILE)", secret: embedsSecrets,
		binding: stringVar(func(c *Config) *string { return &c.Database.URL }, databaseURL)},
	{name: "database.partitions", flag: "partitions", def: "1", help: "the cluster's partitions, each with its own leader and journal (1 to 1024): fixed when the cluster is created (its first coordinator or 'fairway migrate' records it), since a group's partition is a hash of its name modulo the count; see docs/operations.md, \"Partitions\"",
		binding: intVar(func(c *Config) *int { return &c.Database.Partitions }, 1, partition.Max)},
	{name: "database.partition-urls", flag: "partition-urls", def: "", help: "the databases of the partitions that do not live in database.url's: P=URL pairs separated by spaces, e.g. \"1=postgres://b/fairway 3=postgres://c/fairway\" (several partitions may share a database)", secret: embedsSecrets,
		binding: binding{typ: "P=URL ...",
			set: func(c *Config, s string) (err error) {
				c.Database.PartitionURLs, err = partition.ParseURLs(s)
				return err
			},
			get: func(c *Config) string { return partition.FormatURLs(c.Database.PartitionURLs) }}},
	{name: "scheduler.pool-size", flag: "pool-size", def: "4", help: "number of jobs one executor runs at the same time",
		binding: intVar(func(c *Config) *int { return &c.Scheduler.PoolSize }, 1, -1)},
	{name: "scheduler.prefetch", flag: "prefetch", def: "0", help: "most jobs one executor holds beyond its pool, waiting for a slot, when jobs are short (sized from their measured run times; 0: up to the pool size; -1: none)",
		binding: intVar(func(c *Config) *int { return &c.Scheduler.Prefetch }, -1, -1)},
	{name: "scheduler.counting-scheme", flag: "counting-scheme", def: "4,1", help: `"H,L": take H high-priority jobs, then L low-priority jobs, then start over`,
		binding: binding{typ: "H,L",
			set: func(c *Config, s string) (err error) {
				c.Scheduler.CountingScheme, err = fairway.ParseCountingScheme(s)
				return err
			},
			get: func(c *Config) string { return c.Scheduler.CountingScheme.String() }}},
	{name: "scheduler.fairness", flag: "fairness", def: "jobs", help: `what a group's turn is worth: "jobs" (each group with work gets the next job in turn, weighted) or "time" (each group gets its weighted share of the executors' slot-time, from its jobs' measured run times); the same on every coordinator`,
		binding: stringVar(func(c *Config) *string { return &c.Scheduler.Fairness }, oneOf("jobs", "time"))},
	{name: "scheduler.retries", flag: "retries", def: "5", help: "how often a failed job is retried",
		binding: intVar(func(c *Config) *int { return &c.Scheduler.Retries }, 0, 100)},
	{name: "scheduler.retry-delay", flag: "retry-delay", def: "1m", help: "delay before the first retry of a failed job",
		binding: durationVar(func(c *Config) *time.Duration { return &c.Scheduler.RetryDelay })},
	{name: "scheduler.log-buffer-size", flag: "log-buffer-size", def: "500", help: "job log lines buffered before they are stored",
		binding: intVar(func(c *Config) *int { return &c.Scheduler.LogBufferSize }, 1, -1)},
	{name: "scheduler.wakeup-period", flag: "wakeup-period", def: "10s", help: "how often the scheduler looks for work without being notified",
		binding: durationVar(func(c *Config) *time.Duration { return &c.Scheduler.WakeupPeriod })},
	{name: "coordinator.max-args-size", flag: "max-args-size", def: "1MiB", help: "largest accepted job arguments (bytes, or e.g. 512KiB, 1MiB, 2MB; at most 64MiB)",
		binding: binding{typ: "size",
			set: func(c *Config, s string) (err error) { c.Coordinator.MaxArgsSize, err = parseByteSize(s); return err },
			get: func(c *Config) string { return formatByteSize(c.Coordinator.MaxArgsSize) }}},
	{name: "coordinator.lease", flag: "lease", def: "30s", help: "how long a claimed job's lease lasts without a heartbeat",
		binding: durationVar(func(c *Config) *time.Duration { return &c.Coordinator.Lease })},
	{name: "coordinator.metrics-addr", flag: "metrics-addr", def: "", help: "host:port of the coordinator's HTTP endpoint, GET /metrics (Prometheus) and /healthz, e.g. 127.0.0.1:7879 (empty, the default: none; fairway dev serves both on executor.http-addr)",
		binding: stringVar(func(c *Config) *string { return &c.Coordinator.MetricsAddr }, optional(hostPort))},
	{name: "coordinator.ingest-batch", flag: "ingest-batch", def: "500", help: "most submitted jobs written to the database in one batch",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.IngestBatch }, 1, 10000)},
	{name: "coordinator.event-per-message", flag: "event-per-message", def: "false", help: "publish each event in a message of its own (a JSON object) instead of in batches (a JSON array per group, task and state): for subscribers that read the events stream raw and expect one event per message; costs several times the CPU per event",
		binding: boolVar(func(c *Config) *bool { return &c.Coordinator.EventPerMessage })},
	{name: "coordinator.api-workers", flag: "api-workers", def: "16", help: "API requests a coordinator answers at once",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.APIWorkers }, 1, 1024)},
	{name: "coordinator.api-group-workers", flag: "api-group-workers", def: "1", help: "API requests of one group a coordinator answers at once (at most coordinator.api-workers)",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.APIGroupWorkers }, 1, 1024)},
	{name: "coordinator.api-queue", flag: "api-queue", def: "1024", help: "API requests waiting for a worker; beyond: unavailable (one group may have an eighth waiting; beyond: quota)",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.APIQueue }, 1, -1)},
	{name: "coordinator.quota.api-rate", flag: "api-rate", def: "100", help: "API requests per second per group on each coordinator; beyond: quota (0: unlimited)",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.APIRate }, 0, -1)},
	{name: "coordinator.quota.api-burst", flag: "api-burst", def: "200", help: "API requests a group may send at once above coordinator.quota.api-rate",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.APIBurst }, 1, -1)},
	{name: "coordinator.quota.jobs", flag: "quota-jobs", def: "100000", help: "most unfinished jobs (pending, waiting, stuck, and held by executors) of one group; a submission beyond is refused with code quota (0: unlimited)",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.QuotaJobs }, 0, -1)},
	{name: "coordinator.quota.submit-rate", flag: "quota-submit-rate", def: "1000", help: "submissions per second of one group through one coordinator; beyond, they wait in NATS and are stored later, in order, never refused (0: unlimited)",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.QuotaSubmitRate }, 0, -1)},
	{name: "coordinator.quota.submit-burst", flag: "quota-submit-burst", def: "5000", help: "submissions one group may send at once above coordinator.quota.submit-rate (the token bucket's size)",
		binding: intVar(func(c *Config) *int { return &c.Coordinator.QuotaSubmitBurst }, 1, -1)},
	{name: "coordinator.memory-limit", flag: "memory-limit", def: "1GiB", help: "the memory budget of a process that runs a coordinator (fairway coordinator, fairway dev): Go's soft memory limit, which makes the garbage collector work harder near it; what the coordinator holds of NATS's backlogs is bounded well below it (docs/security.md)",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.MemoryLimit })},
	{name: "coordinator.gc-headroom", flag: "gc-headroom", def: "64MiB", help: "how far the garbage collector lets the heap of a process that runs a coordinator grow past its live data once that is larger (below it, by the live data: Go's GOGC=100): a journal leader holding 1,000,000 waiting jobs stays within 400 MiB; a GOGC in the environment wins (0: Go's default alone)",
		binding: sizeOrZeroVar(func(c *Config) *int64 { return &c.Coordinator.GCHeadroom })},
	{name: "coordinator.gc-heap-floor", flag: "gc-heap-floor", def: "256MiB", help: "the heap the garbage collector lets a process that runs a coordinator grow to before collecting, however little it holds (at most ten times its live data): a drain's coordinator spent a fifth to a quarter of its CPU collecting a heap of 30–60 MiB at Go's GOGC=100; a GOGC in the environment wins (0: none)",
		binding: sizeOrZeroVar(func(c *Config) *int64 { return &c.Coordinator.GCHeapFloor })},
	{name: "coordinator.quota.submit-bytes-rate", flag: "quota-submit-bytes-rate", def: "16MiB", help: "bytes of submissions per second of one group through one coordinator, as coordinator.quota.submit-rate counts them: a group sending few, large submissions keeps a pace too; beyond, they wait in NATS (within the group's stream's bytes) and are stored later",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.QuotaSubmitBytesRate })},
	{name: "coordinator.quota.submit-bytes-burst", flag: "quota-submit-bytes-burst", def: "64MiB", help: "bytes of submissions one group may send at once above coordinator.quota.submit-bytes-rate (the token bucket's size)",
		binding: streamSizeVar(func(c *Config) *int64 { return &c.Coordinator.QuotaSubmitBytesBurst })},
	{name: "coordinator.retention.success", flag: "retention-success", def: "24h", help: "how long jobs that succeeded are kept, with their logs, before the coordinators prune them (0: for ever)",
		binding: retentionVar(func(c *Config) *time.Duration { return &c.Coordinator.RetentionSuccess })},
	{name: "coordinator.retention.failed", flag: "retention-failed", def: "720h", help: "how long failed jobs are kept, with their logs (0: for ever)",
		binding: retentionVar(func(c *Config) *time.Duration { return &c.Coordinator.RetentionFailed })},
	{name: "coordinator.retention.cancelled", flag: "retention-cancelled", def: "720h", help: "how long cancelled jobs are kept, with their logs (0: for ever)",
		binding: retentionVar(func(c *Config) *time.Duration { return &c.Coordinator.RetentionCancelled })},
	{name: "executor.app-id", flag: "app-id", def: "", help: "executor id (letters, digits, - and _; empty: the hostname)",
		binding: stringVar(func(c *Config) *string { return &c.Executor.AppID }, optional(token))},
	{name: "executor.heartbeat", flag: "heartbeat", def: "5s", help: "how often an executor renews the leases of its running jobs",
		binding: durationVar(func(c *Config) *time.Duration { return &c.Executor.Heartbeat })},
	{name: "executor.http-addr", flag: "http-addr", def: "127.0.0.1:7878", help: "host:port of the executor's HTTP endpoint (empty: disabled)",
		binding: stringVar(func(c *Config) *string { return &c.Executor.HTTPAddr }, optional(hostPort))},
	{name: "executor.http-token", flag: "http-token", def: "", help: "bearer token that POST /api/v1/shutdownAndExit requires (letters, digits, -._~+/; at least 16; empty: a random one, written to executor.http-token-file)", secret: secretValue,
		binding: stringVar(func(c *Config) *string { return &c.Executor.HTTPToken }, optional(bearerToken))},
	{name: "executor.http-token-file", flag: "http-token-file", def: "", help: "file (mode 0600) the generated HTTP token is written to (empty: <dev.dir>/executor-<app-id>.token)",
		binding: stringVar(func(c *Config) *string { return &c.Executor.HTTPTokenFile }, func(string) error { return nil })},
	{name: "executor.max-concurrent", flag: "max-concurrent", def: "", help: "per task, at most this many of its jobs at once on this executor: task=N pairs, comma-separated (e.g. sleep=2,fail=1); its other free slots take other tasks' jobs",
		binding: stringVar(func(c *Config) *string { return &c.Executor.MaxConcurrent }, func(s string) error { _, err := TaskCounts(s); return err })},
	{name: "executor.drain-timeout", flag: "drain-timeout", def: "30s", help: "how long a stopping executor waits for running jobs",
		binding: durationVar(func(c *Config) *time.Duration { return &c.Executor.DrainTimeout })},
	{name: "web.addr", flag: "web-addr", def: "127.0.0.1:8090", help: "host:port of the dashboard and HTTP API (fairway web and fairway dev; empty: none in fairway dev). Loopback unless you set it otherwise",
		binding: stringVar(func(c *Config) *string { return &c.Web.Addr }, optional(hostPort))},
	{name: "web.admin-token", flag: "web-admin-token", def: "", help: "token that logs in to the dashboard and HTTP API as admin (letters, digits, -._~+/; at least 16). Required by fairway web; fairway dev makes a random one, in <dev-dir>/web-admin.token", secret: secretValue,
		binding: stringVar(func(c *Config) *string { return &c.Web.AdminToken }, optional(bearerToken))},
	{name: "web.read-token", flag: "web-read-token", def: "", help: "token that logs in as the read-only role, which sees no args or results and changes nothing (empty: no such role; fairway dev makes one, in <dev-dir>/web-read.token)", secret: secretValue,
		binding: stringVar(func(c *Config) *string { return &c.Web.ReadToken }, optional(bearerToken))},
	{name: "web.group", flag: "web-group", def: "", help: "confine the dashboard to one tenant's group, through that tenant's API (connect with the tenant's NATS credential); empty: every group, through the operator API",
		binding: stringVar(func(c *Config) *string { return &c.Web.Group }, optional(token))},
	{name: "web.max-connections", flag: "web-max-connections", def: "512", help: "connections the dashboard and HTTP API hold at once; one more waits until one closes",
		binding: intVar(func(c *Config) *int { return &c.Web.MaxConnections }, 1, 1_000_000)},
	{name: "web.max-connections-per-address", flag: "web-max-connections-per-address", def: "32", help: "connections from one client address (an IPv4 address, an IPv6 /64) the dashboard holds at once; one more is answered 503 at once. Behind a reverse proxy every client has the proxy's address: raise it, and bound clients at the proxy (docs/operations.md)",
		binding: intVar(func(c *Config) *int { return &c.Web.MaxConnectionsPerAddr }, 1, 1_000_000)},
	{name: "tracing.endpoint", flag: "tracing-endpoint", def: "", help: "OTLP/HTTP endpoint that coordinators and executors send their spans to, e.g. http://127.0.0.1:4318 (/v1/traces is added to a URL without a path; empty, the default: tracing off)", secret: embedsSecrets,
		binding: stringVar(func(c *Config) *string { return &c.Tracing.Endpoint }, optional(otlpURL))},
	{name: "tracing.sample-ratio", flag: "tracing-sample-ratio", def: "1", help: "share of new traces recorded, 0 to 1; a job whose submitter sent a trace follows the submitter's decision",
		binding: floatVar(func(c *Config) *float64 { return &c.Tracing.SampleRatio }, 0, 1)},
	{name: "tracing.service-name", flag: "tracing-service-name", def: "fairway", help: "service.name of the spans this process sends",
		binding: stringVar(func(c *Config) *string { return &c.Tracing.ServiceName }, nonEmpty)},
	{name: "dev.dir", flag: "dev-dir", def: ".fairway", help: "directory for the development cluster's state; without nats.url, commands use the NATS of the fairway dev recorded there (dev.json)",
		binding: stringVar(func(c *Config) *string { return &c.Dev.Dir }, nonEmpty)},
	{name: "dev.nats-addr", flag: "nats-addr", def: "127.0.0.1:4222", help: "host:port of the development NATS server",
		binding: stringVar(func(c *Config) *string { return &c.Dev.NATSAddr }, hostPort)},
	{name: "dev.pg-port", flag: "pg-port", def: "5433", help: "port of the development PostgreSQL server",
		binding: intVar(func(c *Config) *int { return &c.Dev.PGPort }, 1, 65535)},
	{name: "dev.tenants", flag: "tenants", def: "", help: "comma-separated groups: run the development NATS in operator mode with an account and a credential for each (<dev-dir>/creds/tenant-<group>.creds)",
		binding: stringVar(func(c *Config) *string { return &c.Dev.Tenants }, tokenList)},
}

// byName indexes keys by name.
var byName = func() map[string]*key {
	m := make(map[string]*key, len(keys))
	for i := range keys {
		m[keys[i].name] = &keys[i]
	}
	return m
}()

// envName returns the environment variable for a key name.
func envName(name string) string {
	return "FAIRWAY_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(name))
}

// Key describes one configuration key, for documentation.
type Key struct {
	Name    string // koanf path, e.g. "scheduler.pool-size"
	Flag    string // flag name without dashes, e.g. "pool-size"
	Env     string // environment variable, e.g. "FAIRWAY_SCHEDULER_POOL_SIZE"
	Default string
	Help    string
	Secret  bool // masked by Print and in errors
}

// Keys lists every configuration key, sorted by name.
func Keys() []Key {
	out := make([]Key, 0, len(keys))
	for _, k := range keys {
		out = append(out, Key{Name: k.name, Flag: k.flag, Env: envName(k.name), Default: k.def, Help: k.help, Secret: k.secret != public})
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func stringVar(p func(*Config) *string, check func(string) error) binding {
	return binding{typ: "string",
		set: func(c *Config, s string) error {
			if err := check(s); err != nil {
				return err
			}
			*p(c) = s
			return nil
		},
		get: func(c *Config) string { return *p(c) }}
}

// intVar binds an int in [lo, hi]; hi < 0 means no upper bound.
func intVar(p func(*Config) *int, lo, hi int) binding {
	return binding{typ: "int",
		set: func(c *Config, s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			switch {
			case err != nil:
				return fmt.Errorf("not an integer")
			case n < lo:
				return fmt.Errorf("must be at least %d", lo)
			case hi >= 0 && n > hi:
				return fmt.Errorf("must be at most %d", hi)
			}
			*p(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*p(c)) }}
}

// boolVar binds true or false (as strconv.ParseBool reads them).
func boolVar(p func(*Config) *bool) binding {
	return binding{typ: "bool",
		set: func(c *Config, s string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("not true or false")
			}
			*p(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*p(c)) }}
}

// floatVar binds a number in [lo, hi].
func floatVar(p func(*Config) *float64, lo, hi float64) binding {
	return binding{typ: "float",
		set: func(c *Config, s string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			switch {
			case err != nil || math.IsNaN(f):
				return fmt.Errorf("not a number")
			case f < lo || f > hi:
				return fmt.Errorf("must be from %g to %g", lo, hi)
			}
			*p(c) = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(*p(c), 'g', -1, 64) }}
}

// int64Var is a positive count.
func int64Var(p func(*Config) *int64) binding {
	return binding{typ: "int",
		set: func(c *Config, s string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			switch {
			case err != nil:
				return fmt.Errorf("not an integer")
			case n < 1:
				return fmt.Errorf("must be at least 1")
			}
			*p(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*p(c), 10) }}
}

// streamSizeVar is a stream's size: bytes or a number with a unit, up to
// 1024GiB.
func streamSizeVar(p func(*Config) *int64) binding {
	return binding{typ: "size",
		set: func(c *Config, s string) (err error) { *p(c), err = parseStreamSize(s); return err },
		get: func(c *Config) string { return formatByteSize(*p(c)) }}
}

// sizeOrZeroVar is streamSizeVar that also takes 0 (off).
func sizeOrZeroVar(p func(*Config) *int64) binding {
	return binding{typ: "size",
		set: func(c *Config, s string) (err error) {
			switch t := strings.TrimSpace(s); {
			case t == "0":
				*p(c) = 0
				return nil
			case strings.HasPrefix(t, "-"):
				return errors.New("must not be negative (0 turns it off)")
			}
			*p(c), err = parseStreamSize(s)
			return err
		},
		get: func(c *Config) string {
			if *p(c) == 0 {
				return "0"
			}
			return formatByteSize(*p(c))
		}}
}

// retentionVar is a duration where 0 means for ever.
func retentionVar(p func(*Config) *time.Duration) binding {
	return durationBinding(p, true, "examples: 24h, 720h; 0 keeps jobs for ever")
}

// durationVar is a positive duration.
func durationVar(p func(*Config) *time.Duration) binding {
	return durationBinding(p, false, "examples: 30s, 1m, 2h")
}

func durationBinding(p func(*Config) *time.Duration, zeroOK bool, examples string) binding {
	return binding{typ: "duration",
		set: func(c *Config, s string) error {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			switch {
			case err != nil:
				return fmt.Errorf("not a duration (%s)", examples)
			case zeroOK && d < 0:
				return fmt.Errorf("must not be negative (%s)", examples)
			case !zeroOK && d <= 0:
				return fmt.Errorf("must be positive")
			}
			*p(c) = d
			return nil
		},
		get: func(c *Config) string { return formatDuration(*p(c)) }}
}

// formatDuration is time.Duration.String without zero minutes and
// seconds: "1m" rather than "1m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func oneOf(values ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(values, s) {
			return fmt.Errorf("must be one of %s", strings.Join(values, ", "))
		}
		return nil
	}
}

func optional(check func(string) error) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		return check(s)
	}
}

func anything(string) error { return nil }

func nonEmpty(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// token checks that s is usable as one NATS subject token.
func token(s string) error {
	if !tokenRE.MatchString(s) {
		return fmt.Errorf("must be non-empty and contain only letters, digits, - and _")
	}
	return nil
}

// TaskCounts parses task=N pairs, comma-separated (may be empty), each N
// at least 1.
func TaskCounts(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		task, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not task=N", part)
		}
		if err := token(task); err != nil {
			return nil, fmt.Errorf("%q: the task %w", part, err)
		}
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: N must be a whole number, at least 1", part)
		}
		out[task] = v
	}
	return out, nil
}

// tokenList checks a comma-separated list of subject tokens (may be empty).
func tokenList(s string) error {
	if s == "" {
		return nil
	}
	for part := range strings.SplitSeq(s, ",") {
		if err := token(strings.TrimSpace(part)); err != nil {
			return fmt.Errorf("%q: %w", part, err)
		}
	}
	return nil
}

func natsURL(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.Host == "" {
			return fmt.Errorf("not a URL (example: nats://127.0.0.1:4222)")
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("scheme must be nats, tls, ws or wss, not %q", u.Scheme)
		}
	}
	return nil
}

// otlpURL checks the URL of an OTLP/HTTP receiver.
func otlpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("not a URL (example: http://127.0.0.1:4318)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme must be http or https, not %q (the OTLP exporter speaks HTTP, not gRPC)", u.Scheme)
	}
	return nil
}

func databaseURL(s string) error {
	if !strings.Contains(s, "://") {
		return nil // empty, or a keyword/value connection string
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL (example: postgres://user:password@host/db)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("scheme must be postgres or postgresql, not %q", u.Scheme)
	}
	return nil
}

var bearerTokenRE = regexp.MustCompile(`^[A-Za-z0-9._~+/-]{16,}$`)

// bearerToken checks an HTTP bearer token: it has no "=" (b64token's
// padding), so that masking never mistakes it for keyword=value text.
func bearerToken(s string) error {
	if !bearerTokenRE.MatchString(s) {
		return fmt.Errorf("must be at least 16 letters, digits, '-', '.', '_', '~', '+' or '/'")
	}
	return nil
}

func hostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("not host:port (example: 127.0.0.1:7878)")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}
