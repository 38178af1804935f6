package store

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/job_exists.sql
	jobExistsSQL string
	//go:embed sql/log_lines.sql
	logLinesSQL string
)

// Paging defaults and caps of ListJobs and LogLines.
const (
	ListLimitDefault = 100
	ListLimitMax     = 1000
	LogsLimitDefault = 1000
	LogsLimitMax     = 10000
	// LogMessageMaxDefault caps a log line's message in LogLines' answers;
	// a longer one is cut and ends with a marker saying so.
	LogMessageMaxDefault = 64 << 10
	// fullChunkMax caps how many jobs with args and result one query of a
	// full listing reads; the first reads fullChunkFirst, the next as many
	// as ListParams.MaxBytes still has room for at the average size so far
	// (plus one), so that a listing that stops when its reply is full has
	// read few rows it did not use.
	fullChunkMax   = 256
	fullChunkFirst = 4
)

// jobColumnsLight is jobColumns without args and result (NULL instead): a
// listing that does not show them never reads them.
var jobColumnsLight string

func init() {
	light := jobColumns
	for _, col := range []string{"args", "result"} {
		n := strings.Replace(light, " "+col+",", " NULL::jsonb,", 1)
		if n == light {
			panic("store: job_columns.sql has no column " + col)
		}
		light = n
	}
	jobColumnsLight = light
}

// likeEscaper makes text a literal LIKE pattern.
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// seqRow scans a row selected as seq followed by job columns.
type seqRow struct {
	pgx.Row
	seq *int64
}

func (r seqRow) Scan(dest ...any) error { return r.Row.Scan(append([]any{r.seq}, dest...)...) }

// parseCursor reads a cursor of ListJobs or LogLines: the decimal sequence
// number of the last item of the previous page. "" starts at the beginning.
func parseCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n <= 0 {
		return 0, fairway.Invalid("cursor", "%q is not a cursor of this listing: pass the next_cursor of a previous answer", cursor)
	}
	return n, nil
}

// ListRecords streams the records of ended jobs that p selects, newest
// ended first: by their seq, the batch's id and the record's place in it
// (fairway_record_job, migration 027). At most p.Limit of them (ListLimitDefault
// when 0); without p.Full they come without args and result, which are
// never read. yield returns false to refuse a job and stop; ListRecords
// then returns the cursor after the last job yield took (the last
// record's seq), and also when more records exist beyond p.Limit. The
// cursor is "" when nothing is left. Memory stays bounded: rows are read
// one at a time, and a full listing reads a few rows per query (see
// fullChunkMax).
func (s *Store) ListRecords(ctx context.Context, p ListParams, yield func(fairway.Job) bool) (next string, err error) {
	before, err := parseCursor(p.Cursor)
	if err != nil {
		return "", err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = ListLimitDefault
	}
	cols := jobColumnsLight
	if p.Full {
		cols = jobColumns
	}
	// Batch by batch, newest first (the batches' key), each batch's
	// records newest first; one group's through the batches that hold it
	// (fairway_record_groups).
	group := "$1 = ''"
	if p.Group != "" {
		group = "groups @> ARRAY[$1::text] AND group_name = $1"
	}
	query := "SELECT seq, " + cols + ` FROM fairway_record_job
		WHERE ` + group + ` AND ($2 = '' OR task = $2) AND ($3 = '' OR state = $3) AND ($4 = 0 OR (batch <= $4 / 1048576 AND seq < $4))
		  AND ($6 = '' OR priority = $6) AND ($7::timestamptz IS NULL OR submitted >= $7) AND ($8::timestamptz IS NULL OR submitted < $8)
		  AND ($9 = '' OR args::text ILIKE $9 ESCAPE '\' OR error ILIKE $9 ESCAPE '\')
		ORDER BY batch DESC, seq DESC LIMIT $5`
	var since, until *time.Time
	if !p.Since.IsZero() {
		since = &p.Since
	}
	if !p.Until.IsZero() {
		until = &p.Until
	}
	text := ""
	if p.Text != "" {
		text = "%" + likeEscaper.Replace(p.Text) + "%"
	}
	taken, last, used := 0, before, 0
	for {
		want := limit + 1 - taken
		if p.Full {
			chunk := fullChunkFirst
			if taken > 0 && p.MaxBytes > 0 {
				chunk = max(0, p.MaxBytes-used)/max(1, used/taken) + 1
			}
			want = min(want, max(1, min(chunk, fullChunkMax)))
		}
		rows, err := s.pool.Query(ctx, query, p.Group, p.Task, string(p.State), last, want, string(p.Priority), since, until, text)
		if err != nil {
			return "", fmt.Errorf("listing jobs: %w", interpretError(err))
		}
		got, stop := 0, false
		for rows.Next() {
			var seq int64
			job, err := scanJob(seqRow{rows, &seq})
			if err != nil {
				rows.Close()
				return "", fmt.Errorf("listing jobs: %w", interpretError(err))
			}
			got++
			if taken == limit || !yield(job) {
				stop = true // more exist: this one
				break
			}
			taken, last, used = taken+1, seq, used+len(job.Args)+len(job.Result)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", fmt.Errorf("listing jobs: %w", interpretError(err))
		}
		switch {
		case stop && taken == 0:
			return p.Cursor, nil
		case stop:
			return strconv.FormatInt(last, 10), nil
		case got < want:
			return "", nil // the end
		}
	}
}

// LogsParams selects a page of a job's log.
type LogsParams struct {
	Group string
	ID    string
	// Cursor continues after the line a previous page ended with.
	Cursor string
	// Limit caps the lines. Defaults to LogsLimitDefault.
	Limit int
	// MessageMax caps each message in bytes. Defaults to
	// LogMessageMaxDefault.
	MessageMax int
	// Live: the job is known to exist, unfinished (in the journal
	// engine's state, where fairway_job has no row of it yet).
	Live bool
}

// LogLines streams a page of the log lines of the job p.ID of p.Group,
// oldest first, to yield; as ListJobs, yield returns false to refuse a line
// and stop, and the cursor returned continues after the last line taken
// ("" when nothing is left). A message longer than p.MessageMax bytes is
// cut, at most that much of it read, and ends with a marker saying how
// long it was. A job of another group is not found.
func (s *Store) LogLines(ctx context.Context, p LogsParams, yield func(fairway.LogLine) bool) (next string, err error) {
	after, err := parseCursor(p.Cursor)
	if err != nil {
		return "", err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = LogsLimitDefault
	}
	maxMsg := p.MessageMax
	if maxMsg <= 0 {
		maxMsg = LogMessageMaxDefault
	}
	exists := p.Live
	if !exists {
		if err := s.pool.QueryRow(ctx, jobExistsSQL, p.Group, p.ID).Scan(&exists); err != nil {
			return "", fmt.Errorf("reading job %s: %w", p.ID, interpretError(err))
		}
	}
	if !exists {
		return "", fairway.NotFound(p.ID)
	}
	// left() counts characters, each at least a byte: maxMsg characters
	// hold at least maxMsg bytes.
	rows, err := s.pool.Query(ctx, logLinesSQL,
		p.Group, p.ID, after, maxMsg, limit+1)
	if err != nil {
		return "", fmt.Errorf("reading the log of job %s: %w", p.ID, interpretError(err))
	}
	defer rows.Close()
	taken, last := 0, after
	for rows.Next() {
		var id int64
		var size int
		var l fairway.LogLine
		if err := rows.Scan(&id, &l.Group, &l.JobID, &l.Attempt, &l.Time, &l.Level, &l.Message, &size); err != nil {
			return "", fmt.Errorf("reading the log of job %s: %w", p.ID, interpretError(err))
		}
		if size > maxMsg {
			l.Message = TruncateText(l.Message, maxMsg) + fmt.Sprintf(" … [truncated: %d of %d bytes shown]", len(TruncateText(l.Message, maxMsg)), size)
		}
		if taken == limit || !yield(l) {
			if taken == 0 {
				return p.Cursor, nil
			}
			return strconv.FormatInt(last, 10), nil
		}
		taken, last = taken+1, id
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("reading the log of job %s: %w", p.ID, interpretError(err))
	}
	return "", nil
}

// TruncateText cuts s to at most n bytes, at a character boundary.
func TruncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
