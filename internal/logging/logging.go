// Package logging builds Fairway's process logger: coloured text for people
// at a terminal, JSON for everything else. Log attribute keys in Fairway are
// snake_case (job_id, app_id).
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/lmittmann/tint"
)

// New returns the process logger writing to w. level is debug, info, warn
// or error. format is text (tint: short time, colour when w is a terminal
// and NO_COLOR is unset), json, or auto: text when w is a terminal, else
// JSON.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	tty := isTerminal(w)
	switch format {
	case "text":
	case "auto":
		if !tty {
			format = "json"
		}
	case "json":
	default:
		return nil, fmt.Errorf("logging: unknown format %q (want auto, text or json)", format)
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	}
	return slog.New(tint.NewTextHandler(w, &tint.Options{
		Level:      lvl,
		TimeFormat: "15:04:05.000",
		NoColor:    !tty || os.Getenv("NO_COLOR") != "",
	})), nil
}

// ParseLevel parses debug, info, warn or error (case-insensitive).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("logging: unknown level %q (want debug, info, warn or error)", s)
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
