package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

func TestEventJSON(t *testing.T) {
	t.Parallel()
	ev := events.Event{ID: "7", JobID: "j", Task: "echo", Group: "acme", State: fairway.StateStuck, PreviousState: fairway.StateRunning,
		Attempt: 1, Error: "boom", Executor: "ex1", Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"7","job_id":"j","task":"echo","group":"acme","state":"stuck","previous_state":"running",
		"attempt":1,"error":"boom","executor":"ex1","time":"2026-11-22T10:00:00Z"}`, string(data))
}

// BenchmarkEventEncoding measures encoding one lifecycle event.
//
//	go test -run '^$' -bench EventEncoding ./events/
func BenchmarkEventEncoding(b *testing.B) {
	ev := events.Event{ID: "123456", JobID: fairway.NewID(), Task: "resize", Group: "acme", State: fairway.StateSuccess,
		PreviousState: fairway.StateRunning, Attempt: 1, Executor: "host-1", Time: time.Now()}
	for b.Loop() {
		if _, err := json.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeReports(t *testing.T) {
	t.Parallel()
	reports, err := events.DecodeReports([]byte(` [{"type":"started","job_id":"a","attempt":1},{"type":"done","job_id":"a","attempt":1,"outcome":"success"}]`))
	require.NoError(t, err)
	require.Len(t, reports, 2)
	require.Equal(t, events.ReportDone, reports[1].Type)
	reports, err = events.DecodeReports([]byte(`{"type":"log","job_id":"b"}`))
	require.NoError(t, err)
	require.Equal(t, []events.Report{{Type: events.ReportLog, JobID: "b"}}, reports)
	_, err = events.DecodeReports([]byte(`[{"type":1}]`))
	require.Error(t, err)
}
