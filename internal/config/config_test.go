package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fairway.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs)
	fs.String("config", "", "not a config key") // ignored by Load
	require.NoError(t, fs.Parse(args))
	return fs
}

func TestDefaults(t *testing.T) {
	c, err := Load("", nil, nil)
	require.NoError(t, err)

	want := &Config{
		Log:       LogConfig{Level: "info", Format: "auto"},
		NATS:      NATSConfig{URL: "nats://127.0.0.1:4222", Prefix: "fairway", Replicas: 1},
		Database:  DatabaseConfig{URL: "", Partitions: 1, PartitionURLs: map[int]string{}},
		Scheduler: SchedulerConfig{PoolSize: 4, CountingScheme: fairway.CountingScheme{High: 4, Low: 1}, Fairness: "jobs", Retries: 5, RetryDelay: time.Minute, LogBufferSize: 500, WakeupPeriod: 10 * time.Second},
		Coordinator: CoordinatorConfig{MaxArgsSize: 1 << 20, Lease: 30 * time.Second, IngestBatch: 500, APIWorkers: 16, APIGroupWorkers: 1, APIQueue: 1024, APIRate: 100, APIBurst: 200, QuotaJobs: 100_000, QuotaSubmitRate: 1000, QuotaSubmitBurst: 5000, QuotaSubmitBytesRate: 16 << 20, QuotaSubmitBytesBurst: 64 << 20, MemoryLimit: 1 << 30, GCHeadroom: 64 << 20, GCHeapFloor: 256 << 20,
			SubmitMaxBytes: 1 << 30, SubmitMaxMsgs: 10_000_000, ResultsMaxBytes: 1 << 30, ExecutorResultsMaxBytes: 64 << 20, EventsMaxBytes: 4 << 30, DeadMaxBytes: 256 << 20, DeadMaxAge: 720 * time.Hour,
			RetentionSuccess: 24 * time.Hour, RetentionFailed: 720 * time.Hour, RetentionCancelled: 720 * time.Hour},
		Executor: ExecutorConfig{AppID: "", Heartbeat: 5 * time.Second, HTTPAddr: "127.0.0.1:7878", DrainTimeout: 30 * time.Second},
		Web:      WebConfig{Addr: "127.0.0.1:8090", MaxConnections: 512, MaxConnectionsPerAddr: 32},
		Tracing:  TracingConfig{SampleRatio: 1, ServiceName: "fairway"},
		Dev:      DevConfig{Dir: ".fairway", NATSAddr: "127.0.0.1:4222", PGPort: 5433},
	}
	want.sources = c.sources
	require.Equal(t, want, c)
	for _, k := range Keys() {
		require.Equal(t, SourceDefault, c.Source(k.Name), k.Name)
	}

	// Unset flags do not override anything.
	c2, err := Load("", nil, flags(t))
	require.NoError(t, err)
	require.Equal(t, c, c2)
}

func TestLayers(t *testing.T) {
	file := writeFile(t, `
scheduler:
  pool-size: 8
  retries: 2
  retry-delay: 2m
coordinator:
  max-args-size: 512KiB
nats:
  prefix: file
`)
	env := []string{
		"PATH=/bin",
		"FAIRWAY_SCHEDULER_RETRIES=3",
		"FAIRWAY_NATS_PREFIX=env",
		"FAIRWAY_TEST_WHATEVER=ignored",
		"FAIRWAY_DATABASE_URL=postgres://u:secret@h/db",
	}
	for _, tc := range []struct {
		name   string
		file   string
		env    []string
		args   []string
		key    string
		want   func(*Config) any
		value  any
		source string
	}{
		{"file over default", file, nil, nil, "scheduler.pool-size", func(c *Config) any { return c.Scheduler.PoolSize }, 8, SourceFile},
		{"file duration", file, nil, nil, "scheduler.retry-delay", func(c *Config) any { return c.Scheduler.RetryDelay }, 2 * time.Minute, SourceFile},
		{"file byte size", file, nil, nil, "coordinator.max-args-size", func(c *Config) any { return c.Coordinator.MaxArgsSize }, int64(512 << 10), SourceFile},
		{"env over file", file, env, nil, "scheduler.retries", func(c *Config) any { return c.Scheduler.Retries }, 3, SourceEnv},
		{"env over default", "", env, nil, "database.url", func(c *Config) any { return c.Database.URL }, "postgres://u:secret@h/db", SourceEnv},
		{"file kept under env", file, env, nil, "scheduler.pool-size", func(c *Config) any { return c.Scheduler.PoolSize }, 8, SourceFile},
		{"flag over env", file, env, []string{"--prefix=flag"}, "nats.prefix", func(c *Config) any { return c.NATS.Prefix }, "flag", SourceFlag},
		{"flag over file", file, env, []string{"--pool-size", "16"}, "scheduler.pool-size", func(c *Config) any { return c.Scheduler.PoolSize }, 16, SourceFlag},
		{"flag over default", "", nil, []string{"--counting-scheme=2,3"}, "scheduler.counting-scheme", func(c *Config) any { return c.Scheduler.CountingScheme }, fairway.CountingScheme{High: 2, Low: 3}, SourceFlag},
		{"unset flag keeps env", file, env, []string{"--pool-size=16"}, "nats.prefix", func(c *Config) any { return c.NATS.Prefix }, "env", SourceEnv},
		{"empty flag clears", "", env, []string{"--database-url="}, "database.url", func(c *Config) any { return c.Database.URL }, "", SourceFlag},
		{"env replicas", "", []string{"FAIRWAY_NATS_REPLICAS=3"}, nil, "nats.replicas", func(c *Config) any { return c.NATS.Replicas }, 3, SourceEnv},
		{"flag replicas", "", []string{"FAIRWAY_NATS_REPLICAS=3"}, []string{"--replicas=5"}, "nats.replicas", func(c *Config) any { return c.NATS.Replicas }, 5, SourceFlag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.file, tc.env, flags(t, tc.args...))
			require.NoError(t, err)
			require.Equal(t, tc.value, tc.want(c))
			require.Equal(t, tc.source, c.Source(tc.key))
		})
	}
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		env  string // NAME=value
		want string
	}{
		{"FAIRWAY_SCHEDULER_POOL_SIZE=0", `config: scheduler.pool-size = "0" (from env FAIRWAY_SCHEDULER_POOL_SIZE): must be at least 1`},
		{"FAIRWAY_SCHEDULER_POOL_SIZE=four", `scheduler.pool-size = "four" (from env FAIRWAY_SCHEDULER_POOL_SIZE): not an integer`},
		{"FAIRWAY_LOG_LEVEL=loud", `log.level = "loud" (from env FAIRWAY_LOG_LEVEL): must be one of debug, info, warn, error`},
		{"FAIRWAY_LOG_FORMAT=xml", `log.format = "xml" (from env FAIRWAY_LOG_FORMAT): must be one of auto, text, json`},
		{"FAIRWAY_NATS_URL=http://x:4222", `nats.url = "http://x:4222" (from env FAIRWAY_NATS_URL): scheme must be nats, tls, ws or wss, not "http"`},
		{"FAIRWAY_NATS_URL=nats://a:4222,localhost", `nats.url = "nats://a:4222,localhost" (from env FAIRWAY_NATS_URL): not a URL`},
		{"FAIRWAY_NATS_PREFIX=a.b", `nats.prefix = "a.b" (from env FAIRWAY_NATS_PREFIX): must be non-empty and contain only letters, digits, - and _`},
		{"FAIRWAY_NATS_PREFIX=", `nats.prefix = "" (from env FAIRWAY_NATS_PREFIX): must be non-empty`},
		{"FAIRWAY_NATS_REPLICAS=0", `config: nats.replicas = "0" (from env FAIRWAY_NATS_REPLICAS): must be at least 1`},
		{"FAIRWAY_NATS_REPLICAS=6", `config: nats.replicas = "6" (from env FAIRWAY_NATS_REPLICAS): must be at most 5`},
		{"FAIRWAY_NATS_REPLICAS=three", `config: nats.replicas = "three" (from env FAIRWAY_NATS_REPLICAS): not an integer`},
		{"FAIRWAY_DATABASE_URL=mysql://u:pw@h/db", `database.url = "mysql://u:****@h/db" (from env FAIRWAY_DATABASE_URL): scheme must be postgres or postgresql`},
		{"FAIRWAY_SCHEDULER_COUNTING_SCHEME=0,0", `scheduler.counting-scheme = "0,0" (from env FAIRWAY_SCHEDULER_COUNTING_SCHEME): counts must not both be 0`},
		{"FAIRWAY_SCHEDULER_RETRIES=-1", `scheduler.retries = "-1" (from env FAIRWAY_SCHEDULER_RETRIES): must be at least 0`},
		{"FAIRWAY_SCHEDULER_RETRY_DELAY=abc", `scheduler.retry-delay = "abc" (from env FAIRWAY_SCHEDULER_RETRY_DELAY): not a duration (examples: 30s, 1m, 2h)`},
		{"FAIRWAY_SCHEDULER_RETRY_DELAY=0s", `scheduler.retry-delay = "0s" (from env FAIRWAY_SCHEDULER_RETRY_DELAY): must be positive`},
		{"FAIRWAY_SCHEDULER_LOG_BUFFER_SIZE=0", `scheduler.log-buffer-size = "0" (from env FAIRWAY_SCHEDULER_LOG_BUFFER_SIZE): must be at least 1`},
		{"FAIRWAY_SCHEDULER_WAKEUP_PERIOD=-1s", `scheduler.wakeup-period = "-1s" (from env FAIRWAY_SCHEDULER_WAKEUP_PERIOD): must be positive`},
		{"FAIRWAY_COORDINATOR_MAX_ARGS_SIZE=65MiB", `coordinator.max-args-size = "65MiB" (from env FAIRWAY_COORDINATOR_MAX_ARGS_SIZE): must be at most 64MiB`},
		{"FAIRWAY_COORDINATOR_MAX_ARGS_SIZE=0", `coordinator.max-args-size = "0" (from env FAIRWAY_COORDINATOR_MAX_ARGS_SIZE): must be positive`},
		{"FAIRWAY_COORDINATOR_MAX_ARGS_SIZE=1XB", `coordinator.max-args-size = "1XB" (from env FAIRWAY_COORDINATOR_MAX_ARGS_SIZE): not a size`},
		{"FAIRWAY_COORDINATOR_GC_HEADROOM=-1MiB", `coordinator.gc-headroom = "-1MiB" (from env FAIRWAY_COORDINATOR_GC_HEADROOM): must not be negative (0 turns it off)`},
		{"FAIRWAY_COORDINATOR_GC_HEADROOM=lots", `coordinator.gc-headroom = "lots" (from env FAIRWAY_COORDINATOR_GC_HEADROOM): not a size`},
		{"FAIRWAY_COORDINATOR_LEASE=forever", `coordinator.lease = "forever" (from env FAIRWAY_COORDINATOR_LEASE): not a duration`},
		{"FAIRWAY_COORDINATOR_RETENTION_FAILED=-1h", `coordinator.retention.failed = "-1h" (from env FAIRWAY_COORDINATOR_RETENTION_FAILED): must not be negative (examples: 24h, 720h; 0 keeps jobs for ever)`},
		{"FAIRWAY_COORDINATOR_INGEST_BATCH=10001", `coordinator.ingest-batch = "10001" (from env FAIRWAY_COORDINATOR_INGEST_BATCH): must be at most 10000`},
		{"FAIRWAY_COORDINATOR_INGEST_BATCH=0", `coordinator.ingest-batch = "0" (from env FAIRWAY_COORDINATOR_INGEST_BATCH): must be at least 1`},
		{"FAIRWAY_EXECUTOR_APP_ID=a b", `executor.app-id = "a b" (from env FAIRWAY_EXECUTOR_APP_ID): must be non-empty and contain only letters`},
		{"FAIRWAY_EXECUTOR_HEARTBEAT=5", `executor.heartbeat = "5" (from env FAIRWAY_EXECUTOR_HEARTBEAT): not a duration`},
		{"FAIRWAY_EXECUTOR_HTTP_ADDR=localhost", `executor.http-addr = "localhost" (from env FAIRWAY_EXECUTOR_HTTP_ADDR): not host:port`},
		{"FAIRWAY_EXECUTOR_HTTP_ADDR=:http", `executor.http-addr = ":http" (from env FAIRWAY_EXECUTOR_HTTP_ADDR): port "http" is not a number`},
		{"FAIRWAY_EXECUTOR_DRAIN_TIMEOUT=0", `executor.drain-timeout = "0" (from env FAIRWAY_EXECUTOR_DRAIN_TIMEOUT): must be positive`},
		{"FAIRWAY_DEV_DIR=", `dev.dir = "" (from env FAIRWAY_DEV_DIR): must not be empty`},
		{"FAIRWAY_DEV_NATS_ADDR=127.0.0.1", `dev.nats-addr = "127.0.0.1" (from env FAIRWAY_DEV_NATS_ADDR): not host:port`},
		{"FAIRWAY_DEV_PG_PORT=65536", `dev.pg-port = "65536" (from env FAIRWAY_DEV_PG_PORT): must be at most 65535`},
		{"FAIRWAY_DEV_PG_PORT=0", `dev.pg-port = "0" (from env FAIRWAY_DEV_PG_PORT): must be at least 1`},
		{"FAIRWAY_TRACING_ENDPOINT=grpc://collector:4317", `tracing.endpoint = "grpc://collector:4317" (from env FAIRWAY_TRACING_ENDPOINT): scheme must be http or https`},
		{"FAIRWAY_TRACING_ENDPOINT=collector:4318", `tracing.endpoint = "collector:4318" (from env FAIRWAY_TRACING_ENDPOINT): not a URL`},
		{"FAIRWAY_TRACING_SAMPLE_RATIO=1.5", `tracing.sample-ratio = "1.5" (from env FAIRWAY_TRACING_SAMPLE_RATIO): must be from 0 to 1`},
		{"FAIRWAY_TRACING_SAMPLE_RATIO=half", `tracing.sample-ratio = "half" (from env FAIRWAY_TRACING_SAMPLE_RATIO): not a number`},
		{"FAIRWAY_DATABASE_PARTITIONS=0", `database.partitions = "0" (from env FAIRWAY_DATABASE_PARTITIONS): must be at least 1`},
		{"FAIRWAY_DATABASE_PARTITIONS=1025", `database.partitions = "1025" (from env FAIRWAY_DATABASE_PARTITIONS): must be at most 1024`},
		{"FAIRWAY_DATABASE_PARTITION_URLS=postgres://h/db", `database.partition-urls = "postgres://h/db" (from env FAIRWAY_DATABASE_PARTITION_URLS): "postgres://h/db" is not P=URL`},
		{"FAIRWAY_DATABASE_PARTITION_URLS=x=postgres://h/db", `database.partition-urls = "x=postgres://h/db" (from env FAIRWAY_DATABASE_PARTITION_URLS): "x=postgres://h/db": the partition "x" is not a number from 0 to 1023`},
		{"FAIRWAY_DATABASE_PARTITION_URLS=1=host=h", `(from env FAIRWAY_DATABASE_PARTITION_URLS): partition 1: "host=h" is not a postgres:// URL`},
		{"FAIRWAY_DATABASE_PARTITION_URLS=1=postgres://h/a 1=postgres://h/b", `partition 1 is named twice`},
		{"FAIRWAY_DATABASE_PARTITION_URLS=2=postgres://h/a", `config: database.partition-urls: partition 2 has a database, but the cluster's 1 partitions are numbered 0 to 0 (database.partitions is 1)`},
		{"FAIRWAY_TRACING_SERVICE_NAME=", `tracing.service-name = "" (from env FAIRWAY_TRACING_SERVICE_NAME): must not be empty`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			_, err := Load("", []string{tc.env}, nil)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestValidValues(t *testing.T) {
	c, err := Load("", []string{
		"FAIRWAY_NATS_URL=nats://a:4222, tls://b:4222,ws://c,wss://d",
		"FAIRWAY_EXECUTOR_HTTP_ADDR=",
		"FAIRWAY_EXECUTOR_APP_ID=exec-1_a",
		"FAIRWAY_DATABASE_URL=host=h user=u password=secret dbname=db",
		"FAIRWAY_EXECUTOR_HEARTBEAT=1500ms",
		"FAIRWAY_SCHEDULER_RETRIES=0",
		"FAIRWAY_TRACING_ENDPOINT=https://tempo.internal:4318/otlp/v1/traces",
		"FAIRWAY_TRACING_SAMPLE_RATIO=0.25",
		"FAIRWAY_COORDINATOR_GC_HEADROOM=0",
	}, nil)
	require.NoError(t, err)
	require.Zero(t, c.Coordinator.GCHeadroom, "0 turns the collector's pace off")
	require.Equal(t, TracingConfig{Endpoint: "https://tempo.internal:4318/otlp/v1/traces", SampleRatio: 0.25, ServiceName: "fairway"}, c.Tracing)
	require.Equal(t, "", c.Executor.HTTPAddr)
	require.Equal(t, 1500*time.Millisecond, c.Executor.Heartbeat)
	require.Equal(t, 0, c.Scheduler.Retries)
}

func TestErrorSources(t *testing.T) {
	file := writeFile(t, "scheduler:\n  retry-delay: abc\n  pool-size: [1, 2]\n")
	_, err := Load(file, []string{"FAIRWAY_SCHEDULER_RETRIES=x"}, flags(t, "--lease=soon"))
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, `config: scheduler.retry-delay = "abc" (from file `+file+`): not a duration (examples: 30s, 1m, 2h)`)
	require.Contains(t, msg, `scheduler.pool-size = "[1 2]" (from file `+file+`): must be a single value`)
	require.Contains(t, msg, `scheduler.retries = "x" (from env FAIRWAY_SCHEDULER_RETRIES): not an integer`)
	require.Contains(t, msg, `coordinator.lease = "soon" (from flag --lease): not a duration`)
	require.Len(t, strings.Split(msg, "\n"), 4, "all errors are collected")
}

func TestUnknownEnv(t *testing.T) {
	_, err := Load("", []string{"FAIRWAY_SCHEDULER_POOLSIZE=3", "FAIRWAY_NOPE=1", "FAIRWAY_TEST_DSN=x"}, nil)
	require.ErrorContains(t, err, "unknown environment variable FAIRWAY_SCHEDULER_POOLSIZE (did you mean FAIRWAY_SCHEDULER_POOL_SIZE?)")
	require.Contains(t, strings.Split(err.Error(), "\n"), "config: unknown environment variable FAIRWAY_NOPE")

	_, err = Load("", []string{"FAIRWAY_POOL_SIZE=3"}, nil)
	require.EqualError(t, err, "config: unknown environment variable FAIRWAY_POOL_SIZE (did you mean FAIRWAY_SCHEDULER_POOL_SIZE?)")
	require.NotContains(t, err.Error(), "FAIRWAY_TEST_DSN")
}

func TestFileErrors(t *testing.T) {
	file := writeFile(t, "schedular:\n  pool-size: 3\nlog:\n  level: debug\n")
	_, err := Load(file, nil, nil)
	require.ErrorContains(t, err, `config: unknown key "schedular.pool-size" in file `+file+` (did you mean scheduler.pool-size?)`)

	file = writeFile(t, "pool-size: 3\n")
	_, err = Load(file, nil, nil)
	require.EqualError(t, err, `config: unknown key "pool-size" in file `+file+` (did you mean scheduler.pool-size?)`)

	file = writeFile(t, "scheduler: 3\n")
	_, err = Load(file, nil, nil)
	require.ErrorContains(t, err, `unknown key "scheduler" in file `+file)
	require.NotContains(t, err.Error(), "pool-size", "defaults survive a bad section")

	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, nil)
	require.ErrorContains(t, err, "missing.yaml")

	file = writeFile(t, "scheduler: [\n")
	_, err = Load(file, nil, nil)
	require.ErrorContains(t, err, "config: reading "+file)

	c, err := Load(writeFile(t, ""), nil, nil)
	require.NoError(t, err, "an empty file is fine")
	require.Equal(t, 4, c.Scheduler.PoolSize)
}

func TestByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "1048576", want: 1 << 20},
		{in: "100B", want: 100},
		{in: "512KiB", want: 512 << 10},
		{in: "1MiB", want: 1 << 20},
		{in: "64MiB", want: 64 << 20},
		{in: "2MB", want: 2_000_000},
		{in: "10KB", want: 10_000},
		{in: "1 MiB", want: 1 << 20},
		{in: "67108KB", want: 67_108_000},
		{in: "67109KB", err: "at most 64MiB"},
		{in: "1GiB", err: "at most 64MiB"},
		{in: "1GB", err: "at most 64MiB"},
		{in: "0", err: "must be positive"},
		{in: "-1KiB", err: "must be positive"},
		{in: "1.5MiB", err: "not a size"},
		{in: "MiB", err: "not a size"},
		{in: "1mb", err: "not a size"},
		{in: "", err: "not a size"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseByteSize(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			again, err := parseByteSize(formatByteSize(got))
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
	require.Equal(t, "1MiB", formatByteSize(1<<20))
	require.Equal(t, "2000000", formatByteSize(2_000_000))

	// Plain YAML integers are bytes.
	c, err := Load(writeFile(t, "coordinator:\n  max-args-size: 2048\n"), nil, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2048), c.Coordinator.MaxArgsSize)
}

func TestPrint(t *testing.T) {
	file := writeFile(t, "scheduler:\n  pool-size: 8\n")
	c, err := Load(file, []string{"FAIRWAY_DATABASE_URL=postgres://u:secret@h:5432/db?sslmode=disable"}, flags(t, "--log-level=debug"))
	require.NoError(t, err)

	var buf bytes.Buffer
	require.NoError(t, c.Print(&buf))
	out := buf.String()
	require.NotContains(t, out, "secret")
	for _, line := range []string{
		"database.url: postgres://u:****@h:5432/db?sslmode=disable # env\n",
		"scheduler.pool-size: 8 # file\n",
		"log.level: debug # flag\n",
		"log.format: auto # default\n",
		"scheduler.counting-scheme: 4,1 # default\n",
		"coordinator.max-args-size: 1MiB # default\n",
		"scheduler.retry-delay: 1m # default\n",
		`executor.app-id: "" # default` + "\n",
	} {
		require.Contains(t, out, line)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(Keys()))
	names := make([]string, len(lines))
	for i, line := range lines {
		names[i], _, _ = strings.Cut(line, ":")
	}
	require.IsIncreasing(t, names)
}

// TestSetFrom: a value a command finds (the NATS URL of a running fairway
// dev) is checked like any other, and Print names where it came from.
func TestSetFrom(t *testing.T) {
	c, err := Load("", nil, nil)
	require.NoError(t, err)
	require.NoError(t, c.SetFrom("nats.url", "nats://127.0.0.1:4333", SourceDevDir))
	require.Equal(t, "nats://127.0.0.1:4333", c.NATS.URL)
	require.Equal(t, SourceDevDir, c.Source("nats.url"))
	var buf bytes.Buffer
	require.NoError(t, c.Print(&buf))
	require.Contains(t, buf.String(), "nats.url: nats://127.0.0.1:4333 # dev-dir\n")

	// A bad value is refused, and the one held before stays.
	err = c.SetFrom("nats.url", "http://x", SourceDevDir)
	require.ErrorContains(t, err, `nats.url = "http://x" (from dev-dir)`)
	require.Equal(t, "nats://127.0.0.1:4333", c.NATS.URL)
	// So is one that breaks a rule across keys: two ways to authenticate.
	creds, err := Load("", []string{"FAIRWAY_NATS_USER=u"}, nil)
	require.NoError(t, err)
	err = creds.SetFrom("nats.url", "nats://tok-s3cret@127.0.0.1:4333", SourceDevDir)
	require.ErrorContains(t, err, "only one way to authenticate")
	require.NotContains(t, err.Error(), "s3cret")
	require.Equal(t, "nats://127.0.0.1:4222", creds.NATS.URL)
	require.Equal(t, SourceDefault, creds.Source("nats.url"))
	require.ErrorContains(t, c.SetFrom("no.such-key", "x", SourceDevDir), "unknown key")
}

// TestPrintMasksEveryForm loads each form of secret from each layer and
// checks that Print shows none of them.
func TestPrintMasksEveryForm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		env   []string
		flags []string
		want  string // a line Print must show
	}{
		{name: "nats url password from env", env: []string{"FAIRWAY_NATS_URL=nats://u:secret@h:4222"}, want: "nats.url: nats://u:****@h:4222 # env"},
		{name: "nats url token from flag", flags: []string{"--nats-url=nats://secrettoken@h:4222"}, want: "nats.url: nats://****@h:4222 # flag"},
		{name: "several nats urls from file", file: "nats:\n  url: nats://a:secret1@h1:4222,nats://b:secret2@h2:4222\n",
			want: "nats.url: nats://a:****@h1:4222,nats://b:****@h2:4222 # file"},
		{name: "nats password from env", env: []string{"FAIRWAY_NATS_USER=u", "FAIRWAY_NATS_PASSWORD=secret"}, want: "nats.password: **** # env"},
		{name: "nats password from file", file: "nats:\n  user: u\n  password: secret\n", want: "nats.password: **** # file"},
		{name: "nats token from env", env: []string{"FAIRWAY_NATS_TOKEN=secret"}, want: "nats.token: **** # env"},
		{name: "nats token from flag", flags: []string{"--token=secret"}, want: "nats.token: **** # flag"},
		{name: "database url", env: []string{"FAIRWAY_DATABASE_URL=postgres://u:secret@h/db"}, want: "database.url: postgres://u:****@h/db # env"},
		{name: "database dsn", env: []string{"FAIRWAY_DATABASE_URL=host=h user=u password=secret dbname=db"}, want: "database.url: host=h user=u password=**** dbname=db # env"},
		{name: "database dsn quoted", file: "database:\n  url: \"host=h password='a secret' dbname=db\"\n", want: "database.url: host=h password=**** dbname=db # file"},
		{name: "database dsn spaces", flags: []string{"--database-url=host=h password = secret dbname=db"}, want: "database.url: host=h password = **** dbname=db # flag"},
		{name: "partition urls", env: []string{"FAIRWAY_DATABASE_PARTITIONS=4", "FAIRWAY_DATABASE_PARTITION_URLS=3=postgres://u:secret@c/db  1=postgres://u:secret@b/db"},
			want: "database.partition-urls: 1=postgres://u:****@b/db 3=postgres://u:****@c/db # env"},
		{name: "executor http token from env", env: []string{"FAIRWAY_EXECUTOR_HTTP_TOKEN=secret-0123456789abcdef"}, want: "executor.http-token: **** # env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file)
			}
			c, err := Load(file, tc.env, flags(t, tc.flags...))
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, c.Print(&buf))
			require.NotContains(t, buf.String(), "secret")
			require.Contains(t, buf.String(), tc.want+"\n")
		})
	}
}

// TestErrorsMaskSecrets: a bad value of a key that holds secrets is quoted
// masked in the error.
func TestErrorsMaskSecrets(t *testing.T) {
	_, err := Load("", []string{"FAIRWAY_NATS_URL=http://u:secret@h:4222", "FAIRWAY_DATABASE_URL=mysql://u:secret@h/db", "FAIRWAY_DATABASE_PARTITION_URLS=1=mysql://u:secret@h/db"}, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), `nats.url = "http://u:****@h:4222" (from env FAIRWAY_NATS_URL)`)
	require.Contains(t, err.Error(), `database.url = "mysql://u:****@h/db" (from env FAIRWAY_DATABASE_URL)`)
	require.Contains(t, err.Error(), `database.partition-urls = "1=mysql://u:****@h/db" (from env FAIRWAY_DATABASE_PARTITION_URLS): partition 1: "mysql://u:****@h/db" is not a postgres:// URL`)
	require.NotContains(t, err.Error(), "secret")
}

func TestKeyTable(t *testing.T) {
	flagNames, envNames := map[string]bool{}, map[string]bool{}
	for _, k := range Keys() {
		require.False(t, flagNames[k.Flag], "duplicate flag %s", k.Flag)
		require.False(t, envNames[k.Env], "duplicate env %s", k.Env)
		flagNames[k.Flag], envNames[k.Env] = true, true
		require.NotEmpty(t, k.Help, k.Name)
		require.NotContains(t, k.Env, "FAIRWAY_TEST_")
	}
	require.Equal(t, "FAIRWAY_SCHEDULER_POOL_SIZE", envName("scheduler.pool-size"))
	for d, want := range map[time.Duration]string{time.Minute: "1m", time.Hour: "1h", 90 * time.Minute: "1h30m", 30 * time.Second: "30s", 1500 * time.Millisecond: "1.5s", 61 * time.Second: "1m1s"} {
		require.Equal(t, want, formatDuration(d))
	}

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs, "scheduler.pool-size", "database.url", "nats.url")
	require.NotNil(t, fs.Lookup("pool-size"))
	require.NotNil(t, fs.Lookup("database-url"))
	require.NotNil(t, fs.Lookup("nats-url"))
	require.Nil(t, fs.Lookup("app-id"))
	require.Contains(t, fs.FlagUsages(), "--pool-size int")
	require.Contains(t, fs.FlagUsages(), "(default 4)")
	require.Contains(t, fs.FlagUsages(), "FAIRWAY_SCHEDULER_POOL_SIZE")
	require.Panics(t, func() { AddFlags(fs, "no.such-key") })
}

// TestNATSConnectionKeys checks the nats.* credential and TLS keys: each
// file must be readable and of the right kind, and combinations must make
// sense. The errors name the key and what to do.
func TestNATSConnectionKeys(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, []byte("not a credential\n"), 0o600))
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"creds missing", []string{"FAIRWAY_NATS_CREDS=" + missing},
			[]string{`nats.creds = "` + missing + `" (from env FAIRWAY_NATS_CREDS): cannot read the file`, "no such file"}},
		{"creds junk", []string{"FAIRWAY_NATS_CREDS=" + junk}, []string{`nats.creds = "` + junk + `"`, "not a NATS credentials file"}},
		{"nkey junk", []string{"FAIRWAY_NATS_NKEY=" + junk}, []string{`nats.nkey = "` + junk + `"`, "not an nkey seed file"}},
		{"ca junk", []string{"FAIRWAY_NATS_TLS_CA=" + junk}, []string{`nats.tls-ca = "` + junk + `"`, "holds no PEM certificate"}},
		{"cert missing", []string{"FAIRWAY_NATS_TLS_CERT=" + missing, "FAIRWAY_NATS_TLS_KEY=" + junk}, []string{`nats.tls-cert = "` + missing + `"`, "cannot read the file"}},
		{"cert without key", []string{"FAIRWAY_NATS_TLS_CERT=" + junk}, []string{"nats.tls-cert is set but nats.tls-key is not", "--tls-key"}},
		{"key without cert", []string{"FAIRWAY_NATS_TLS_KEY=" + junk}, []string{"nats.tls-key is set but nats.tls-cert is not", "--tls-cert"}},
		{"cert and key junk", []string{"FAIRWAY_NATS_TLS_CERT=" + junk, "FAIRWAY_NATS_TLS_KEY=" + junk}, []string{"nats.tls-cert " + junk + " and nats.tls-key " + junk + " are not a PEM certificate and its private key"}},
		{"password without user", []string{"FAIRWAY_NATS_PASSWORD=secret"}, []string{"nats.password is set but nats.user is not"}},
		{"user and token", []string{"FAIRWAY_NATS_USER=u", "FAIRWAY_NATS_PASSWORD=secret", "FAIRWAY_NATS_TOKEN=secret"}, []string{"nats.user and nats.token are set together: give only one way to authenticate"}},
		{"url user and user", []string{"FAIRWAY_NATS_URL=nats://a:secret@h:4222", "FAIRWAY_NATS_USER=u", "FAIRWAY_NATS_PASSWORD=secret"}, []string{"a user or token in nats.url and nats.user are set together"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("", tc.env, nil)
			require.Error(t, err)
			for _, want := range tc.want {
				require.Contains(t, err.Error(), want)
			}
			require.NotContains(t, err.Error(), "secret")
		})
	}

	c, err := Load("", []string{"FAIRWAY_NATS_USER=u", "FAIRWAY_NATS_PASSWORD=p"}, flags(t, "--token="))
	require.NoError(t, err)
	require.Equal(t, NATSConfig{URL: "nats://127.0.0.1:4222", Prefix: "fairway", Replicas: 1, User: "u", Password: "p"}, c.NATS)
}
