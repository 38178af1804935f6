package executor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

const (
	logFlushInterval = 100 * time.Millisecond // how often pending lines and progress are sent
	progressEvery    = time.Second            // how often one job's progress is sent at most (stored and published at that pace)
	logFlushLines    = 100                    // pending lines that trigger a flush at once
	maxLogMessage    = 8 << 10                // longer messages are truncated
	logLineOverhead  = 128                    // JSON bytes of a log line besides its message
	minLogChunk      = 64 << 10               // smallest report a job's lines are split into
	// maxLogChunk is the largest: a report message is at most
	// events.ReportMaxBytes, and 128 KiB of lines fit in it even escaped
	// six-fold (a '<' is \u003c in JSON).
	maxLogChunk = 128 << 10
)

// logBuffer holds the job log lines and progress values that the flusher
// has not sent yet. It is bounded: a line added while it is full is
// dropped and counted, per job.
type logBuffer struct {
	size    int
	flushAt int
	kick    chan struct{} // capacity 1: flush now

	mu       sync.Mutex
	lines    []fairway.LogLine
	dropped  map[fairway.JobRef]jobCount
	progress map[fairway.JobRef]jobCount
	// sentAt is when each held job's progress was last taken to be sent.
	sentAt map[fairway.JobRef]time.Time
}

// jobCount is a number about one attempt of a job.
type jobCount struct {
	attempt int
	n       int
}

// logBatch is what one flush sends.
type logBatch struct {
	lines    []fairway.LogLine
	dropped  map[fairway.JobRef]jobCount
	progress map[fairway.JobRef]jobCount
}

func newLogBuffer(size int) *logBuffer {
	return &logBuffer{
		size:     size,
		flushAt:  min(size, logFlushLines),
		kick:     make(chan struct{}, 1),
		dropped:  make(map[fairway.JobRef]jobCount),
		progress: make(map[fairway.JobRef]jobCount),
		sentAt:   make(map[fairway.JobRef]time.Time),
	}
}

func (b *logBuffer) add(line fairway.LogLine) {
	b.mu.Lock()
	if len(b.lines) >= b.size {
		ref := fairway.JobRef{Group: line.Group, ID: line.JobID}
		d := b.dropped[ref]
		b.dropped[ref] = jobCount{attempt: line.Attempt, n: d.n + 1}
		b.mu.Unlock()
		return
	}
	b.lines = append(b.lines, line)
	full := len(b.lines) >= b.flushAt
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

func (b *logBuffer) setProgress(job fairway.JobRef, attempt, pct int) {
	b.mu.Lock()
	b.progress[job] = jobCount{attempt: attempt, n: pct}
	b.mu.Unlock()
}

// take removes and returns what is pending at now: every line, and each
// job's latest progress unless that job's was sent less than progressEvery
// ago (all: every progress too, as the executor stops).
func (b *logBuffer) take(now time.Time, all bool) logBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := logBatch{lines: b.lines}
	b.lines = nil
	// Hand the maps over only when they hold something: an empty one stays
	// in use, so it must not be shared.
	if len(b.dropped) > 0 {
		batch.dropped = b.dropped
		b.dropped = make(map[fairway.JobRef]jobCount)
	}
	for job, p := range b.progress {
		if !all && now.Sub(b.sentAt[job]) < progressEvery {
			continue // the latest value waits for its turn
		}
		if batch.progress == nil {
			batch.progress = make(map[fairway.JobRef]jobCount)
		}
		batch.progress[job] = p
		b.sentAt[job] = now
		delete(b.progress, job)
	}
	return batch
}

// takeJob removes and returns what is pending for one job.
func (b *logBuffer) takeJob(jobID fairway.JobRef) logBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch logBatch
	kept := b.lines[:0]
	for _, line := range b.lines {
		if line.Group == jobID.Group && line.JobID == jobID.ID {
			batch.lines = append(batch.lines, line)
		} else {
			kept = append(kept, line)
		}
	}
	clear(b.lines[len(kept):])
	b.lines = kept
	if d, ok := b.dropped[jobID]; ok {
		batch.dropped = map[fairway.JobRef]jobCount{jobID: d}
		delete(b.dropped, jobID)
	}
	if p, ok := b.progress[jobID]; ok {
		batch.progress = map[fairway.JobRef]jobCount{jobID: p}
		delete(b.progress, jobID)
	}
	delete(b.sentAt, jobID)
	return batch
}

// flushLoop sends pending log lines and progress every 100 ms, or at once
// when many lines are pending, and once more when the executor stops.
func (e *Executor) flushLoop() {
	defer e.bgWG.Done()
	t := time.NewTicker(logFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-e.bgStop:
			e.flushLogs(true)
			return
		case <-t.C:
		case <-e.logs.kick:
		}
		e.flushLogs(false)
	}
}

func (e *Executor) flushLogs(all bool) {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	e.publishBatch(e.logs.take(time.Now(), all))
}

// publishBatch sends a batch as one log report per job (split only when it
// would not fit in a NATS message), then one progress report per job.
// Called with e.pubMu held.
func (e *Executor) publishBatch(b logBatch) {
	if len(b.lines) == 0 && len(b.dropped) == 0 && len(b.progress) == 0 {
		return
	}
	now := time.Now().UTC()
	var order []fairway.JobRef
	perJob := make(map[fairway.JobRef][]fairway.LogLine)
	for _, line := range b.lines {
		ref := fairway.JobRef{Group: line.Group, ID: line.JobID}
		if _, seen := perJob[ref]; !seen {
			order = append(order, ref)
		}
		perJob[ref] = append(perJob[ref], line)
	}
	droppedIDs := mapKeys(b.dropped)
	for _, id := range droppedIDs {
		d := b.dropped[id]
		if _, seen := perJob[id]; !seen {
			order = append(order, id)
		}
		perJob[id] = append(perJob[id], fairway.LogLine{Group: id.Group, JobID: id.ID, Attempt: d.attempt, Time: now, Level: "warn",
			Message: fmt.Sprintf("%d log lines dropped (log-buffer-size is %d)", d.n, e.cfg.LogBufferSize)})
	}
	chunk := min(max(int(e.nc.MaxPayload()/2), minLogChunk), maxLogChunk)
	for _, id := range order {
		e.startFirst(id)
		lines := perJob[id]
		for len(lines) > 0 {
			n, size := 0, 0
			for n < len(lines) && (n == 0 || size+len(lines[n].Message)+logLineOverhead <= chunk) {
				size += len(lines[n].Message) + logLineOverhead
				n++
			}
			e.reports.publish(e.report(events.ReportLog, id, lines[0].Attempt, events.Report{Time: now, Logs: lines[:n]}))
			lines = lines[n:]
		}
	}
	for _, id := range mapKeys(b.progress) {
		p := b.progress[id]
		e.startFirst(id)
		e.reports.publish(e.report(events.ReportProgress, id, p.attempt, events.Report{Time: now, Progress: p.n}))
	}
}

// startFirst reports the start of job id, if it runs and its start is
// still waiting for startReportDelay: its log lines and progress come
// after its start, so that the coordinators know when it started (a
// progress report's estimated end needs it). Called with e.pubMu held.
func (e *Executor) startFirst(id fairway.JobRef) {
	e.mu.Lock()
	rj := e.jobs[id]
	e.mu.Unlock()
	if rj == nil {
		return
	}
	ns := rj.startedNS.Load()
	if ns != 0 && rj.startReport.CompareAndSwap(startPending, startSent) {
		e.reports.publish(e.report(events.ReportStarted, id, rj.job.Attempt, events.Report{Time: time.Unix(0, ns).UTC()}))
	}
}

func mapKeys(m map[fairway.JobRef]jobCount) []fairway.JobRef {
	keys := make([]fairway.JobRef, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareRefs)
	return keys
}

func compareRefs(a, b fairway.JobRef) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.ID, b.ID))
}

// report fills in what every report says about its sender and its job:
// the job's group, id and attempt, and this executor's app-id and
// instance. Only the instance that holds the attempt has its reports
// applied.
func (e *Executor) report(typ string, job fairway.JobRef, attempt int, r events.Report) events.Report {
	r.Type, r.Group, r.JobID, r.Attempt = typ, job.Group, job.ID, attempt
	r.Executor, r.Instance = e.cfg.AppID, e.instance
	return r
}

// jobLogHandler is the slog.Handler behind Job.Logger: it turns records
// into the job's log lines and forwards them to the executor's logger at
// debug level.
type jobLogHandler struct {
	job    *Job
	fwd    slog.Handler // the executor's handler, with the job's keys
	attrs  string       // formatted attributes from WithAttrs
	prefix string       // group prefix from WithGroup, "a.b."
}

func (h *jobLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *jobLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.job.finished.Load() {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.prefix, a)
		return true
	})
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	h.job.exec.logs.add(fairway.LogLine{
		Group:   h.job.Group,
		JobID:   h.job.ID,
		Attempt: h.job.Attempt,
		Time:    at.UTC(),
		Level:   levelName(r.Level),
		Message: truncate(b.String()),
	})
	if h.fwd.Enabled(ctx, slog.LevelDebug) {
		fr := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			fr.AddAttrs(a)
			return true
		})
		return h.fwd.Handle(ctx, fr)
	}
	return nil
}

func (h *jobLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		appendAttr(&b, h.prefix, a)
	}
	h2 := *h
	h2.attrs = b.String()
	h2.fwd = h.fwd.WithAttrs(attrs)
	return &h2
}

func (h *jobLogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.prefix = h.prefix + name + "."
	h2.fwd = h.fwd.WithGroup(name)
	return &h2
}

// appendAttr writes " key=value", flattening groups into dotted keys.
func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			appendAttr(b, prefix, ga)
		}
		return
	}
	var v string
	switch a.Value.Kind() {
	case slog.KindTime:
		v = a.Value.Time().Format(time.RFC3339Nano)
	default:
		v = a.Value.String()
	}
	b.WriteByte(' ')
	b.WriteString(prefix)
	b.WriteString(a.Key)
	b.WriteByte('=')
	if v == "" || strings.ContainsAny(v, " \t\r\n\"=") || !utf8.ValidString(v) {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}

// levelName is the level of a log line: debug, info, warn or error.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// truncate caps a log message at maxLogMessage bytes, on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxLogMessage {
		return s
	}
	cut := maxLogMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" … (%d bytes truncated)", len(s)-cut)
}

// lazyAttrs is a handler whose attributes are added to its base handler
// only when a record gets through. slog.Logger.With adds them at once (a
// text or JSON handler formats them, tint copies them), which cost more
// per job than the rest of accepting it from a dispatch reply when the
// level drops every per-job record (an executor at info logs one line per
// job, at warn none).
type lazyAttrs struct {
	base  slog.Handler
	attrs []slog.Attr
	once  sync.Once
	with  slog.Handler // base with attrs, once needed
}

// withLazyAttrs returns a logger that logs to h with attrs, as
// slog.New(h).With(attrs) would.
func withLazyAttrs(h slog.Handler, attrs ...slog.Attr) *slog.Logger {
	return slog.New(&lazyAttrs{base: h, attrs: attrs})
}

func (h *lazyAttrs) resolved() slog.Handler {
	h.once.Do(func() { h.with = h.base.WithAttrs(h.attrs) })
	return h.with
}

func (h *lazyAttrs) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }

func (h *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return h.resolved().Handle(ctx, r)
}

func (h *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler { return h.resolved().WithAttrs(attrs) }

func (h *lazyAttrs) WithGroup(name string) slog.Handler { return h.resolved().WithGroup(name) }
