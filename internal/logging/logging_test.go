package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJSON(t *testing.T) {
	for _, format := range []string{"json", "auto"} { // a buffer is no terminal
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(&buf, "info", format)
			require.NoError(t, err)
			log.Debug("hidden")
			log.Warn("lease expired", "job_id", "j1")

			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			require.Len(t, lines, 1)
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec))
			require.Equal(t, "lease expired", rec["msg"])
			require.Equal(t, "WARN", rec["level"])
			require.Equal(t, "j1", rec["job_id"])
		})
	}
}

func TestText(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "debug", "text")
	require.NoError(t, err)
	log.Debug("claimed", "job_id", "j1")

	out := buf.String()
	require.Contains(t, out, "DBG claimed job_id=j1")
	require.NotContains(t, out, "\x1b[", "no colour when not writing to a terminal")
	require.False(t, json.Valid([]byte(out)))
}

func TestNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	require.NoError(t, err)
	require.False(t, isTerminal(f))
	require.NoError(t, f.Close())
}

func TestErrors(t *testing.T) {
	_, err := New(&bytes.Buffer{}, "loud", "json")
	require.ErrorContains(t, err, `unknown level "loud"`)
	_, err = New(&bytes.Buffer{}, "info", "xml")
	require.ErrorContains(t, err, `unknown format "xml"`)
}

func TestParseLevel(t *testing.T) {
	for s, want := range map[string]string{"debug": "DEBUG", "INFO": "INFO", "warn": "WARN", "error": "ERROR"} {
		l, err := ParseLevel(s)
		require.NoError(t, err)
		require.Equal(t, want, l.String())
	}
}
