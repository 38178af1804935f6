package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamOptions tunes the JetStream streams Fairway creates.
type StreamOptions struct {
	// EventMaxAge is how long lifecycle events are kept for replay.
	// Defaults to 7 days.
	EventMaxAge time.Duration
	// Replicas is the replication factor (3 in a three-node cluster).
	// Defaults to 1.
	Replicas int
	// MaxMsgSize caps one message. Defaults to 8 MiB, which leaves room for
	// 1 MiB of args and the rest of a submission.
	MaxMsgSize int32
	// SubmitMaxBytes and SubmitMaxMsgs cap the submissions waiting to be
	// ingested. When full, JetStream refuses new ones (discard new): the
	// publisher gets an error rather than a submission silently lost.
	// Default to 1 GiB and 10,000,000; negative means unlimited.
	SubmitMaxBytes int64
	SubmitMaxMsgs  int64
	// ResultMaxBytes caps the executor reports waiting to be applied in the
	// shared results stream (executors without a stream of their own:
	// every executor when NATS has no accounts); when full, an executor's
	// report is refused (discard new) and it keeps it to send again.
	// Defaults to 1 GiB; negative means unlimited.
	ResultMaxBytes int64
	// ExecutorResultMaxBytes caps the reports waiting in each executor's
	// own results stream (operator mode, EnsureExecutorResultStream): one
	// executor, however it floods, fills its own stream and no other's.
	// Defaults to ExecutorResultMaxBytesDefault; negative means unlimited.
	ExecutorResultMaxBytes int64
	// EventMaxBytes caps the lifecycle events kept for replay besides
	// EventMaxAge; when full, the oldest go (discard old). Defaults to
	// 4 GiB; negative means unlimited.
	EventMaxBytes int64
	// DeadMaxBytes and DeadMaxAge cap the dead-letter stream; when full,
	// the oldest dead letters go (discard old). Default to 256 MiB and 30
	// days; negative DeadMaxBytes means unlimited.
	DeadMaxBytes int64
	DeadMaxAge   time.Duration
	// TenantSubmitMaxMsgs and TenantSubmitMaxBytes cap each tenant's own
	// submit stream (EnsureTenantSubmitStream). Default to
	// TenantSubmitMaxMsgsDefault and TenantSubmitMaxBytesDefault; negative
	// means unlimited.
	TenantSubmitMaxMsgs  int64
	TenantSubmitMaxBytes int64
}

// ResultMaxMsgsPerExecutor bounds one executor's report messages waiting
// in the shared results stream (a message carries up to 256 KiB of
// reports, ReportMaxBytes with one large result).
const ResultMaxMsgsPerExecutor = 1000

// ReportMaxBytes caps one message of executor reports, headers included:
// the results streams refuse a larger one, whatever the servers'
// max_payload. Executors send their reports in messages of up to 256 KiB;
// a report alone may be larger when it carries a job's result (at most
// MaxResultSize), up to this.
const ReportMaxBytes = MaxResultSize + 64<<10

// MaxResultSize caps a job's result, the JSON its handler returns (as
// fairway.DefaultMaxArgsSize caps its args): a report that carries it fits
// in ReportMaxBytes.
const MaxResultSize = 1 << 20

// ExecutorResultMaxBytesDefault caps each executor's own results stream
// (StreamOptions.ExecutorResultMaxBytes): 64 reports of the largest size,
// thousands of ordinary ones.
const ExecutorResultMaxBytesDefault = 64 << 20

// Defaults of the stream limits (StreamOptions).
const (
	SubmitMaxBytesDefault = 1 << 30
	SubmitMaxMsgsDefault  = 10_000_000
	ResultMaxBytesDefault = 1 << 30
	EventMaxBytesDefault  = 4 << 30
	DeadMaxBytesDefault   = 256 << 20
	DeadMaxAgeDefault     = 30 * 24 * time.Hour
)

// limit turns a StreamOptions limit into JetStream's: 0 is def, negative
// is unlimited (-1).
func limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return -1
	}
	return v
}

// EventMaxAgeDefault is the default retention of lifecycle events.
const EventMaxAgeDefault = 7 * 24 * time.Hour

// MaxMsgSizeDefault is the default cap on one message.
const MaxMsgSizeDefault = 8 << 20

// Tenant submit streams' defaults (EnsureTenantSubmitStream): a tenant's
// submissions waiting in NATS are bounded in messages and in bytes, so
// that a tenant sending few, large messages parks at most this much.
// JetStream reserves a stream's byte limit from the server's storage
// (max_file_store) and the coordinators' account when the stream is made:
// a thousand tenants reserve 64 GiB. Set per tenant with 'fairway creds
// add tenant --max-submit-bytes'.
const (
	TenantSubmitMaxMsgsDefault  = 1_000_000
	TenantSubmitMaxBytesDefault = 64 << 20
)

// SubmitMaxConsumers bounds the groups with submissions in the shared
// submit stream within an hour: each has a consumer of its own there.
const SubmitMaxConsumers = 1_000_000

// SubmitDuplicateWindow is the duplicate window of the submit stream: the
// smallest nats-server accepts (it refuses less than 100 ms, and turns 0
// into its default of 2 minutes). JetStream de-duplicates by Nats-Msg-Id
// across the whole stream, so across groups: one tenant's message would
// make another's with the same Nats-Msg-Id vanish. Submissions are
// de-duplicated in PostgreSQL instead, per group, by job id (a body
// without an id takes the Nats-Msg-Id, or one derived from the stream
// sequence).
const SubmitDuplicateWindow = 100 * time.Millisecond

// EnsureStreams creates or updates the submit, events, results and
// dead-letter streams.
// Coordinators call it at start; it is idempotent. A stream that exists with
// other settings, a replica count included, is updated to these.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s Subjects, opts StreamOptions) error {
	replicas := max(opts.Replicas, 1)
	maxMsg := opts.MaxMsgSize
	if maxMsg == 0 {
		maxMsg = MaxMsgSizeDefault
	}
	maxAge := opts.EventMaxAge
	if maxAge == 0 {
		maxAge = EventMaxAgeDefault
	}
	deadAge := opts.DeadMaxAge
	if deadAge == 0 {
		deadAge = DeadMaxAgeDefault
	}
	configs := []jetstream.StreamConfig{
		{
			Name:        s.SubmitStream(),
			Description: "Fairway submissions, removed once ingested into PostgreSQL",
			Subjects:    []string{s.SubmitAll()},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			MaxMsgSize:  maxMsg,
			Duplicates:  SubmitDuplicateWindow,
			MaxBytes:    limit(opts.SubmitMaxBytes, SubmitMaxBytesDefault),
			MaxMsgs:     limit(opts.SubmitMaxMsgs, SubmitMaxMsgsDefault),
			Discard:     jetstream.DiscardNew,
			RePublish:   &jetstream.RePublish{Source: s.SubmitAll(), Destination: s.join("submitted", "{{wildcard(1)}}", ">"), HeadersOnly: true},
			// A consumer per group (coordinator/sources.go), above
			// the server's default of 1,000 per stream; each goes an hour
			// after its group's last submission.
			MaxConsumers: SubmitMaxConsumers,
		},
		{
			Name:        s.EventStream(),
			Description: "Fairway lifecycle events",
			Subjects:    []string{s.EventsAll()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			MaxAge:      maxAge,
			Duplicates:  2 * time.Minute,
			MaxBytes:    limit(opts.EventMaxBytes, EventMaxBytesDefault),
			Discard:     jetstream.DiscardOld,
		},
		{
			Name:        s.ResultStream(),
			Description: "Fairway executor reports, removed once applied to PostgreSQL",
			Subjects:    []string{s.ResultsAll()},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			MaxMsgSize:  min(maxMsg, ReportMaxBytes),
			MaxBytes:    limit(opts.ResultMaxBytes, ResultMaxBytesDefault),
			Discard:     jetstream.DiscardNew,
			// Announced, headers only, so that coordinators fetch from the
			// executors with reports waiting (coordinator/sources.go),
			// each executor's in turn.
			RePublish:    &jetstream.RePublish{Source: s.join("results", "*"), Destination: s.join("reported", "{{wildcard(1)}}"), HeadersOnly: true},
			MaxConsumers: SubmitMaxConsumers,
			// Each executor reports on a subject of its own: one that sends
			// faster than the coordinators apply fills its own share, and
			// its reports are refused (it keeps them and sends them again),
			// not everyone's. A share is counted in messages here; in
			// operator mode each executor has a stream of its own, bounded
			// in bytes (EnsureExecutorResultStream).
			MaxMsgsPerSubject:    ResultMaxMsgsPerExecutor,
			DiscardNewPerSubject: true,
		},
		{
			Name:        s.DeadStream(),
			Description: "Fairway dead letters: messages that could never be applied",
			Subjects:    []string{s.DeadAll()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			MaxAge:      deadAge,
			MaxBytes:    limit(opts.DeadMaxBytes, DeadMaxBytesDefault),
			Discard:     jetstream.DiscardOld,
		},
	}
	// The configuration key behind each stream's byte limit, for errors.
	keys := map[string]string{
		s.SubmitStream(): "nats.submit-max-bytes", s.EventStream(): "nats.events-max-bytes",
		s.ResultStream(): "nats.results-max-bytes", s.DeadStream(): "nats.dead-max-bytes",
	}
	var reserved int64
	for _, cfg := range configs {
		reserved += max(cfg.MaxBytes, 0)
	}
	for _, cfg := range configs {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			var apiErr *jetstream.APIError
			switch {
			case errors.As(err, &apiErr) && storageRefused[apiErr.ErrorCode]:
				return fmt.Errorf("creating stream %s with a limit of %s (%s): %w. JetStream reserves a file stream's limit from the server's storage (max_file_store) and the account's limits, and these streams' limits add up to %s: lower %s (and the other nats.*-max-bytes), or give JetStream more storage",
					cfg.Name, formatBytes(cfg.MaxBytes), keys[cfg.Name], err, formatBytes(reserved), keys[cfg.Name])
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrJetStreamNotEnabled):
				return fmt.Errorf("creating stream %s: %w (is JetStream enabled on the NATS server?)", cfg.Name, err)
			case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeReplicasNotSupported:
				return fmt.Errorf("creating stream %s with %d replicas: %w (a single NATS server keeps 1 replica: use 1, or a JetStream cluster of at least %d servers)",
					cfg.Name, replicas, err, replicas)
			}
			return fmt.Errorf("creating stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// errCodeReplicasNotSupported is the JetStream error code of a stream asking
// for more than one replica on a server that is not clustered.
const errCodeReplicasNotSupported jetstream.ErrorCode = 10074

// storageRefused are the JetStream error codes of a stream whose limits
// do not fit the server's or the account's storage: waiting will not help.
var storageRefused = map[jetstream.ErrorCode]bool{
	10002: true, // JSAccountResourcesExceededErr: resource limits exceeded for account
	10027: true, // JSMaximumStreamsLimitErr: maximum number of streams reached
	10028: true, // JSMemoryResourcesExceededErr: insufficient memory resources available
	10047: true, // JSStorageResourcesExceededErr: insufficient storage resources available
	10113: true, // JSStreamMaxBytesRequired: account requires a stream config to have max bytes set
	10122: true, // JSStreamMaxStreamBytesExceeded: stream max bytes exceeds account limit max stream bytes
}

// IsStreamConfigRefused says whether an EnsureStreams error will not go away by
// itself (a configuration the servers refuse: replicas a single server
// cannot keep, limits its storage cannot hold), as opposed to JetStream
// not being ready yet (a cluster electing its leader, a server restarting).
func IsStreamConfigRefused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeReplicasNotSupported || storageRefused[apiErr.ErrorCode])
}

// formatBytes writes n in the largest binary unit that divides it nicely,
// as the configuration takes it (1GiB, 512MiB).
func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%dB", n)
}

// TenantEventMaxBytesDefault caps a tenant's own copy of its events
// (512 MiB), within its account's JetStream limit.
const TenantEventMaxBytesDefault = 512 << 20

// EnsureTenantStream creates or updates, in a tenant's own NATS account
// (operator mode, see internal/natsauth), the stream that keeps the
// tenant's copy of its events. The account imports only its group's events,
// so the stream captures nothing else; it has the same name and subjects as
// the coordinators' events stream, so subscribers use it the same way.
// maxBytes <= 0 means TenantEventMaxBytesDefault.
func EnsureTenantStream(ctx context.Context, js jetstream.JetStream, s Subjects, maxAge time.Duration, maxBytes int64) error {
	if maxAge <= 0 {
		maxAge = EventMaxAgeDefault
	}
	if maxBytes <= 0 {
		maxBytes = TenantEventMaxBytesDefault
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.EventStream(),
		Description: "This tenant's Fairway lifecycle events",
		Subjects:    []string{s.EventsAll()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      maxAge,
		MaxBytes:    maxBytes,
		Discard:     jetstream.DiscardOld,
		Duplicates:  2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("creating the tenant's stream %s: %w", s.EventStream(), err)
	}
	return nil
}

// EnsureTenantSubmitStream creates or updates, in the coordinators' account,
// the stream of one tenant's submissions (operator mode, see
// internal/natsauth): the tenant's import renames what it publishes to
// Submit(group, task) into TenantSubmit(group, task), which this stream alone
// captures. Its Nats-Msg-Id duplicate window is the tenant's own, its
// backlog and limits are its own, and it announces what it stores on
// Stored(group, task) as the shared submit stream does. maxMsgs and
// maxBytes: 0 is the default (TenantSubmitMaxMsgsDefault,
// TenantSubmitMaxBytesDefault), negative is unlimited.
func EnsureTenantSubmitStream(ctx context.Context, js jetstream.JetStream, s Subjects, group string, opts StreamOptions) error {
	if err := fairway.CheckName("group", group); err != nil {
		return err
	}
	maxMsg := opts.MaxMsgSize
	if maxMsg == 0 {
		maxMsg = MaxMsgSizeDefault
	}
	name := s.TenantSubmitStream(group)
	source := s.join("tenant-submit", group, ">")
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        name,
		Description: "Fairway submissions of tenant " + group + ", removed once ingested into PostgreSQL",
		Subjects:    []string{source},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(opts.Replicas, 1),
		MaxMsgSize:  maxMsg,
		Duplicates:  SubmitDuplicateWindow,
		MaxBytes:    limit(opts.TenantSubmitMaxBytes, TenantSubmitMaxBytesDefault),
		MaxMsgs:     limit(opts.TenantSubmitMaxMsgs, TenantSubmitMaxMsgsDefault),
		Discard:     jetstream.DiscardNew,
		RePublish:   &jetstream.RePublish{Source: source, Destination: s.join("submitted", group, ">"), HeadersOnly: true},
	})
	if err != nil {
		return fmt.Errorf("creating stream %s of tenant %s: %w", name, group, err)
	}
	return nil
}

// EnsureExecutorResultStream creates or updates, in the coordinators'
// account, the stream of one executor's reports (operator mode, see
// internal/natsauth): the executor's import renames what it publishes to
// Results(appID) into ExecutorResults(appID), which this stream alone
// captures. Its bytes are its own (opts.ExecutorResultMaxBytes): an
// executor that floods fills its own stream, and its reports are refused
// (discard new), while every other executor's are accepted. It announces
// what it stores on Reported(appID), as the shared results stream does.
func EnsureExecutorResultStream(ctx context.Context, js jetstream.JetStream, s Subjects, appID string, opts StreamOptions) error {
	if err := fairway.CheckName("app-id", appID); err != nil {
		return err
	}
	name := s.ExecutorResultStream(appID)
	maxBytes := limit(opts.ExecutorResultMaxBytes, ExecutorResultMaxBytesDefault)
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        name,
		Description: "Fairway reports of executor " + appID + ", removed once applied to PostgreSQL",
		Subjects:    []string{s.ExecutorResults(appID)},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(opts.Replicas, 1),
		MaxMsgSize:  ReportMaxBytes,
		MaxBytes:    maxBytes,
		Discard:     jetstream.DiscardNew,
		RePublish:   &jetstream.RePublish{Source: s.ExecutorResults(appID), Destination: s.Reported(appID), HeadersOnly: true},
	})
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && storageRefused[apiErr.ErrorCode] {
			return fmt.Errorf("creating stream %s of executor %s with a limit of %s (nats.executor-results-max-bytes): %w. JetStream reserves each executor's limit from the server's storage (max_file_store) and the coordinators' account: lower the limit, or give JetStream more storage",
				name, appID, formatBytes(maxBytes), err)
		}
		return fmt.Errorf("creating stream %s of executor %s: %w", name, appID, err)
	}
	return nil
}
