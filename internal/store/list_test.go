package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// ListJobs pages newest first with a cursor, leaves args and result out
// unless Full, and stops where yield refuses, with the cursor there.
func TestListJobsPagesWithACursor(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for i := range 40 {
		j := sub("a", fairway.PriorityLow)
		j.ID = fmt.Sprintf("job-%02d", i)
		j.Args = json.RawMessage(`{"n":1}`)
		subs = append(subs, j)
	}
	insert(t, s, subs...)
	insert(t, s, sub("b", fairway.PriorityLow))
	collect := func(p store.ListParams, stopAfter int) ([]fairway.Job, string) {
		var jobs []fairway.Job
		next, err := s.ListJobs(ctx, p, func(j fairway.Job) bool {
			if len(jobs) == stopAfter {
				return false
			}
			jobs = append(jobs, j)
			return true
		})
		require.NoError(t, err)
		return jobs, next
	}
	for _, full := range []bool{false, true} {
		var ids []string
		p := store.ListParams{Group: "a", Limit: 15, Full: full}
		for {
			jobs, next := collect(p, -1)
			for _, j := range jobs {
				ids = append(ids, j.ID)
				if full {
					require.JSONEq(t, `{"n":1}`, string(j.Args))
				} else {
					require.Nil(t, j.Args)
				}
			}
			if next == "" {
				break
			}
			p.Cursor = next
		}
		require.Len(t, ids, 40, "full %v", full)
		require.Equal(t, "job-39", ids[0])
		require.Equal(t, "job-00", ids[39])
	}
	// yield stops it: the cursor continues after the last job taken.
	jobs, next := collect(store.ListParams{Group: "a", Limit: 100, Full: true}, 20)
	require.Len(t, jobs, 20)
	rest, last := collect(store.ListParams{Group: "a", Limit: 100, Cursor: next}, -1)
	require.Empty(t, last)
	require.Len(t, rest, 20)
	require.Equal(t, "job-19", rest[0].ID)

	_, err := s.ListJobs(ctx, store.ListParams{Cursor: "-3"}, func(fairway.Job) bool { return true })
	require.ErrorIs(t, err, fairway.ErrInvalid)
}

// LogLines pages oldest first and cuts long messages with a marker.
func TestLogLinesPagesAndCutsLongMessages(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: allTasks}, time.Hour, func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	insert(t, s, sub("a", fairway.PriorityLow))
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", Limit: 1, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	j := jobs[0]
	var lines []fairway.LogLine
	for i := range 25 {
		msg := fmt.Sprintf("line %02d", i)
		if i == 3 {
			msg = strings.Repeat("é", 40<<10) // 80 KiB
		}
		lines = append(lines, fairway.LogLine{Level: "info", Message: msg, Time: time.Now()})
	}
	held := store.Attempt{Group: "a", JobID: j.ID, Attempt: j.Attempt, Executor: "w", Instance: "i1"}
	require.NoError(t, s.AppendLogs(ctx, []store.AttemptLog{{Attempt: held, Lines: lines}}))

	var got []fairway.LogLine
	p := store.LogsParams{Group: "a", ID: j.ID, Limit: 10}
	for {
		next, err := s.LogLines(ctx, p, func(l fairway.LogLine) bool { got = append(got, l); return true })
		require.NoError(t, err)
		if next == "" {
			break
		}
		p.Cursor = next
	}
	require.Len(t, got, 25)
	require.Equal(t, "line 24", got[24].Message)
	long := got[3].Message
	require.True(t, strings.HasSuffix(long, "[truncated: 65536 of 81920 bytes shown]"), long[len(long)-60:])
	require.True(t, strings.HasPrefix(long, strings.Repeat("é", 32<<10)))

	_, err = s.LogLines(ctx, store.LogsParams{Group: "b", ID: j.ID}, func(fairway.LogLine) bool { return true })
	require.ErrorIs(t, err, fairway.ErrNotFound, "another group's job")
}
