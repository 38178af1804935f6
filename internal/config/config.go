// Package config loads Fairway's configuration from built-in defaults, an
// optional YAML file, FAIRWAY_* environment variables and command-line
// flags, in increasing order of precedence.
//
// A single key table drives defaults, environment variable names, flags,
// validation and Print; see Keys.
package config

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Config is the effective configuration.
type Config struct {
	Log         LogConfig
	NATS        NATSConfig
	Database    DatabaseConfig
	Scheduler   SchedulerConfig
	Coordinator CoordinatorConfig
	Executor    ExecutorConfig
	Web         WebConfig
	Tracing     TracingConfig
	Dev         DevConfig

	sources map[string]string // key name -> default|file|env|flag|dev-dir
}

// LogConfig holds the log.* keys.
type LogConfig struct {
	Level  string // debug, info, warn or error
	Format string // auto, text or json
}

// NATSConfig holds the nats.* keys. At most one way to authenticate may be
// set: a user in URL, Creds, NKey, User (with Password) or Token; see
// Validate. Package natsconn turns it into connection options.
type NATSConfig struct {
	URL      string // one or more comma-separated server URLs
	Prefix   string // subject prefix, a single subject token
	Replicas int    // replication factor of the JetStream streams, 1..5

	Creds    string // path of a .creds file (user JWT and nkey seed)
	NKey     string // path of a file holding a user nkey seed
	User     string
	Password string // secret
	Token    string // secret
	TLSCA    string // path of a PEM file of CA certificates; implies TLS
	TLSCert  string // path of a PEM client certificate; with TLSKey
	TLSKey   string // path of the PEM private key of TLSCert
}

// DatabaseConfig holds the database.* keys.
type DatabaseConfig struct {
	URL string // PostgreSQL connection string; empty means unset
	// Partitions is the cluster's partition count, PartitionURLs the
	// databases of those not in URL's (Layout).
	Partitions    int
	PartitionURLs map[int]string
}

// Layout is where the partitions live (Layout.Check: each partition the
// map names is one of them).
func (c DatabaseConfig) Layout() partition.Layout {
	return partition.Layout{Count: c.Partitions, Home: c.URL, URLs: c.PartitionURLs}
}

// problems returns what the database.* keys get wrong together.
func (c DatabaseConfig) problems() []error {
	if err := c.Layout().Check(); err != nil {
		return []error{fmt.Errorf("database.partition-urls: %w (database.partitions is %d)", err, c.Partitions)}
	}
	return nil
}

// SchedulerConfig holds the scheduler.* keys, which keep Docspell's meaning.
type SchedulerConfig struct {
	PoolSize       int // job slots of one executor
	Prefetch       int // jobs held beyond them; 0: up to PoolSize, -1: none
	CountingScheme fairway.CountingScheme
	Fairness       string // "jobs" or "time": what a group's turn is worth
	Retries        int
	RetryDelay     time.Duration
	LogBufferSize  int
	WakeupPeriod   time.Duration
}

// CoordinatorConfig holds the coordinator.* keys.
type CoordinatorConfig struct {
	MaxArgsSize int64         // bytes
	Lease       time.Duration // lifetime of a claimed job's lease without a heartbeat
	IngestBatch int
	// EventPerMessage publishes one event per message instead of batches.
	EventPerMessage bool
	MetricsAddr     string // host:port of /metrics and /healthz; empty disables it

	APIWorkers      int // API requests answered at once
	APIGroupWorkers int // API requests of one group answered at once
	APIQueue        int // API requests waiting for a worker
	APIRate         int // API requests per second per group; 0: unlimited
	APIBurst        int // API requests a group may send at once above APIRate
	// Per-group quotas; 0 is unlimited.
	QuotaJobs, QuotaSubmitRate, QuotaSubmitBurst int
	QuotaSubmitBytesRate, QuotaSubmitBytesBurst  int64
	MemoryLimit                                  int64
	GCHeadroom                                   int64 // 0: Go's GOGC alone (gcpace)
	GCHeapFloor                                  int64 // 0: none (gcpace)
	// Limits of the JetStream streams the coordinators create (the
	// nats.*-max-* keys).
	SubmitMaxBytes, SubmitMaxMsgs, ResultsMaxBytes, EventsMaxBytes, DeadMaxBytes int64
	ExecutorResultsMaxBytes                                                      int64
	DeadMaxAge                                                                   time.Duration
	// How long finished jobs are kept, by final state; 0 keeps them.
	RetentionSuccess, RetentionFailed, RetentionCancelled time.Duration
}

// ExecutorConfig holds the executor.* keys.
type ExecutorConfig struct {
	AppID     string // empty means the caller's default (the hostname)
	Heartbeat time.Duration
	HTTPAddr  string // host:port; empty disables the HTTP endpoint
	// HTTPToken is the bearer token of POST /api/v1/shutdownAndExit; empty
	// means a random one, written to HTTPTokenFile.
	HTTPToken     string
	HTTPTokenFile string // empty means <Dev.Dir>/executor-<app-id>.token
	DrainTimeout  time.Duration
	// MaxConcurrent caps, per task, the jobs of it running at once on the
	// executor: task=N pairs, comma-separated (see TaskCounts).
	MaxConcurrent string
}

// TracingConfig holds the tracing.* keys: where coordinators and
// executors send their spans (OTLP over HTTP), if anywhere.
type TracingConfig struct {
	Endpoint    string  // OTLP/HTTP URL; empty turns tracing off
	SampleRatio float64 // share of new traces kept, 0..1
	ServiceName string  // the resource's service.name
}

// WebConfig holds the web.* keys: the dashboard and HTTP API.
type WebConfig struct {
	Addr string // host:port it listens on
	// AdminToken and ReadToken log in as the admin and the read-only
	// role (secrets); empty ReadToken: no read-only role. fairway dev
	// makes random ones when they are empty.
	AdminToken string
	ReadToken  string
	// Group confines it to one tenant's group, through that tenant's API
	// (with the tenant's NATS credential); empty: the operator API.
	Group string
	// MaxConnections and MaxConnectionsPerAddr bound the connections it
	// holds at once, in all and from one client address.
	MaxConnections, MaxConnectionsPerAddr int
}

// DevConfig holds the dev.* keys of the development cluster.
type DevConfig struct {
	Dir      string
	NATSAddr string
	PGPort   int
	// Tenants, comma-separated, turns on operator mode (see natsauth).
	Tenants string
}

// TenantList returns the groups of dev.tenants.
func (d DevConfig) TenantList() []string {
	var out []string
	for part := range strings.SplitSeq(d.Tenants, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Sources of a value, as reported by Config.Source and Print.
const (
	SourceDefault = "default"
	SourceFile    = "file"
	SourceEnv     = "env"
	SourceFlag    = "flag"
	// SourceDevDir: not from the user but from the running fairway dev
	// recorded in dev.dir (nats.url; see SetFrom).
	SourceDevDir = "dev-dir"
)

// Load builds the effective configuration. configFile may be "" (no file);
// a named file that does not exist is an error. environ is os.Environ() in
// production. fs may be nil; only flags registered by AddFlags and set by
// the user are used. All problems found are reported together.
func Load(configFile string, environ []string, fs *pflag.FlagSet) (*Config, error) {
	type layer struct {
		source string
		values map[string]any // key name -> raw value
	}
	defaults := map[string]any{}
	for _, k := range keys {
		defaults[k.name] = k.def
	}
	layers := []layer{{SourceDefault, defaults}}
	var errs []error
	add := func(source string, values map[string]any, err error) {
		layers = append(layers, layer{source, values})
		errs = append(errs, err)
	}
	if configFile != "" {
		values, err := readFile(configFile)
		add(SourceFile, values, err)
	}
	values, err := readEnv(environ)
	add(SourceEnv, values, err)
	if fs != nil {
		values, err := readFlags(fs)
		add(SourceFlag, values, err)
	}

	k := koanf.New(".")
	cfg := &Config{sources: map[string]string{}}
	for _, l := range layers {
		if err := k.Load(confmap.Provider(l.values, "."), nil); err != nil {
			errs = append(errs, fmt.Errorf("config: loading %s values: %w", l.source, err))
		}
		for name := range l.values {
			cfg.sources[name] = l.source
		}
	}

	for _, key := range keys {
		raw, err := scalar(k.Get(key.name))
		if err == nil {
			err = key.set(cfg, raw)
		}
		if err != nil {
			raw = key.masked(raw)
			var from string
			switch src := cfg.Source(key.name); src {
			case SourceFile:
				from = "file " + configFile
			case SourceEnv:
				from = "env " + envName(key.name)
			case SourceFlag:
				from = "flag --" + key.flag
			default:
				from = src
			}
			errs = append(errs, fmt.Errorf("config: %s = %q (from %s): %w", key.name, raw, from, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, err := range append(cfg.NATS.problems(), cfg.Database.problems()...) {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readFile reads a YAML file into a map of known keys. Unknown keys are
// reported as errors.
func readFile(path string) (map[string]any, error) {
	fk := koanf.New(".")
	if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	values := map[string]any{}
	var errs []error
	for _, name := range fk.Keys() {
		if _, ok := byName[name]; !ok {
			errs = append(errs, fmt.Errorf("config: unknown key %q in file %s%s", name, path, suggest(name, keyNames())))
			continue
		}
		values[name] = fk.Get(name)
	}
	return values, errors.Join(errs...)
}

// readFlags returns the values of the flags registered by AddFlags that
// the user set.
func readFlags(fs *pflag.FlagSet) (map[string]any, error) {
	fk := koanf.New(".")
	err := fk.Load(posflag.ProviderWithFlag(fs, ".", nil, func(f *pflag.Flag) (string, any) {
		if v, ok := f.Value.(*flagValue); ok && f.Changed {
			return v.key, v.s
		}
		return "", nil
	}), nil)
	if err != nil {
		return nil, fmt.Errorf("config: reading flags: %w", err)
	}
	return fk.All(), nil
}

// readEnv picks the FAIRWAY_* variables out of environ. Unknown ones are
// errors, except FAIRWAY_TEST_*, which tests use.
func readEnv(environ []string) (map[string]any, error) {
	names := map[string]string{} // env name -> key name
	for _, k := range keys {
		names[envName(k.name)] = k.name
	}
	values := map[string]any{}
	var errs []error
	for _, kv := range environ {
		env, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(env, "FAIRWAY_") || strings.HasPrefix(env, "FAIRWAY_TEST_") {
			continue
		}
		name, ok := names[env]
		if !ok {
			errs = append(errs, fmt.Errorf("config: unknown environment variable %s%s", env, suggest(env, slices.Sorted(maps.Keys(names)))))
			continue
		}
		values[name] = v
	}
	return values, errors.Join(errs...)
}

// scalar turns a raw value from any layer into a string.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case map[string]any, []any:
		return fmt.Sprint(v), errors.New("must be a single value, not a list or map")
	default:
		return fmt.Sprint(v), nil
	}
}

// Source reports where the value of a key came from: "default", "file",
// "env" or "flag".
func (c *Config) Source(key string) string {
	if s, ok := c.sources[key]; ok {
		return s
	}
	return SourceDefault
}

// SetFrom sets key to value, parsed and checked as Load does, and records
// source as where it came from (Source and Print report it). Commands use
// it for values they find rather than the user gives, such as the NATS URL
// of a running fairway dev (SourceDevDir).
func (c *Config) SetFrom(key, value, source string) error {
	k, ok := byName[key]
	if !ok {
		return fmt.Errorf("config: unknown key %q", key)
	}
	old := k.get(c)
	err := k.set(c, value)
	if err == nil {
		err = errors.Join(append(c.NATS.problems(), c.Database.problems()...)...) // e.g. a user in nats.url besides nats.creds
	}
	if err != nil {
		_ = k.set(c, old) // held before: valid
		return fmt.Errorf("config: %s = %q (from %s): %w", key, k.masked(value), source, err)
	}
	if c.sources == nil {
		c.sources = map[string]string{}
	}
	c.sources[key] = source
	return nil
}

// Print writes the configuration as "key: value" lines sorted by key, with
// secrets masked and each value's source as a trailing comment.
func (c *Config) Print(w io.Writer) error {
	var b strings.Builder
	for _, k := range Keys() {
		key := byName[k.Name]
		v := key.masked(key.get(c))
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(&b, "%s: %s # %s\n", k.Name, v, c.Source(k.Name))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// flagValue is the pflag.Value of a configuration flag. It keeps the raw
// string so that Load validates flags like every other source.
type flagValue struct {
	key, typ, s string
}

func (v *flagValue) String() string     { return v.s }
func (v *flagValue) Set(s string) error { v.s = s; return nil }
func (v *flagValue) Type() string       { return v.typ }

// AddFlags registers command-line flags for the given keys on fs; with no
// keys it registers all of them. It panics on an unknown key.
func AddFlags(fs *pflag.FlagSet, keys ...string) {
	if len(keys) == 0 {
		for _, k := range Keys() {
			keys = append(keys, k.Name)
		}
	}
	for _, name := range keys {
		k, ok := byName[name]
		if !ok {
			panic("config: AddFlags: unknown key " + name)
		}
		fs.Var(&flagValue{key: k.name, typ: k.typ, s: k.def}, k.flag,
			fmt.Sprintf("%s (%s, env %s)", k.help, k.name, envName(k.name)))
		if k.typ == "bool" {
			fs.Lookup(k.flag).NoOptDefVal = "true" // --flag alone means true
		}
	}
}

func keyNames() []string { return slices.Sorted(maps.Keys(byName)) }

// suggest returns " (did you mean X?)" for the candidates close to s: a
// small edit away, or with the same last element (FAIRWAY_POOL_SIZE ->
// FAIRWAY_SCHEDULER_POOL_SIZE, pool-size -> scheduler.pool-size).
func suggest(s string, candidates []string) string {
	var close []string
	rest := strings.TrimPrefix(s, "FAIRWAY_")
	if i := strings.LastIndex(rest, "."); i >= 0 {
		rest = rest[i+1:]
	}
	for _, c := range candidates {
		if distance(strings.ToLower(s), strings.ToLower(c)) <= max(2, len(s)/4) ||
			strings.HasSuffix(c, "_"+rest) || strings.HasSuffix(c, "."+rest) {
			close = append(close, c)
		}
	}
	if len(close) == 0 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", strings.Join(close, " or "))
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
