package events_test

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

func TestSubjects(t *testing.T) {
	t.Parallel()
	s := events.NewSubjects("")
	require.Equal(t, "fairway.submit.acme.echo", s.Submit("acme", "echo"))
	require.Equal(t, "fairway.api.acme.cancel", s.API("acme", events.VerbCancel))
	require.Equal(t, "fairway.events.acme.echo.success", s.Event("acme", "echo", fairway.StateSuccess))
	require.Equal(t, "fairway.events.*.*.failed", s.EventFilter("", "", fairway.StateFailed))
	require.Equal(t, "fairway.events.acme.*.*", s.EventFilter("acme", "", ""))
	// A rejected submission's invalid names cannot break the subject.
	require.Equal(t, "fairway.events._._.rejected", s.Event("a.b", "*", fairway.StateRejected))
	require.Equal(t, "FAIRWAY_SUBMIT", s.SubmitStream())
	require.Equal(t, "TENANT-X_EVENTS", events.NewSubjects("tenant-x").EventStream())

	g, task, ok := s.ParseSubmit("fairway.submit.acme.echo")
	require.True(t, ok)
	require.Equal(t, []string{"acme", "echo"}, []string{g, task})
	_, _, ok = s.ParseSubmit("fairway.submit.acme.echo.extra")
	require.False(t, ok)
	_, _, ok = s.ParseSubmit("other.submit.acme.echo")
	require.False(t, ok)
	g, verb, ok := s.ParseAPI("fairway.api.acme.get")
	require.True(t, ok)
	require.Equal(t, []string{"acme", "get"}, []string{g, verb})
	verb, ok = s.ParseAdmin("fairway.admin.executors")
	require.True(t, ok)
	require.Equal(t, "executors", verb)
}

func TestTenantSubmitAndStoredSubjects(t *testing.T) {
	s := events.NewSubjects("")
	group, task, ok := s.ParseSubmit(s.TenantSubmit("acme", "echo"))
	if !ok || group != "acme" || task != "echo" {
		t.Fatalf("ParseSubmit(%q) = %q, %q, %v", s.TenantSubmit("acme", "echo"), group, task, ok)
	}
	if s.TenantSubmitStream("acme") != "FAIRWAY_SUBMIT_T_acme" {
		t.Fatalf("TenantSubmitStream: %q", s.TenantSubmitStream("acme"))
	}
	for subject, want := range map[string]string{s.Stored("acme", "echo"): "acme", "fairway.submitted.g": "g", "fairway.submitted.": "", "fairway.other.g.t": ""} {
		got, ok := s.ParseStored(subject)
		if got != want || ok != (want != "") {
			t.Errorf("ParseStored(%q) = %q, %v; want %q", subject, got, ok, want)
		}
	}
}
