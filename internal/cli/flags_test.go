package cli_test

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/demo"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestEveryKeyHasItsFlag: every configuration key's flag exists on a
// command, and the keys that `fairway coordinator` and `fairway executor`
// read (retention, max-concurrent) are their flags, and dev's, as
// docs/configuration.md says; before, those answered "unknown flag" and
// worked only from the environment or YAML.
func TestEveryKeyHasItsFlag(t *testing.T) {
	onCommands := map[string][]string{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, k := range config.Keys() {
			if k.Flag != "" && c.Flags().Lookup(k.Flag) != nil {
				onCommands[k.Name] = append(onCommands[k.Name], c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cli.Command())
	for _, k := range config.Keys() {
		require.NotEmpty(t, onCommands[k.Name], "no command has --%s, the flag of %s", k.Flag, k.Name)
	}
	for key, cmds := range map[string][]string{
		"executor.max-concurrent":         {"fairway executor", "fairway dev"},
		"coordinator.retention.success":   {"fairway coordinator", "fairway dev"},
		"coordinator.retention.failed":    {"fairway coordinator", "fairway dev"},
		"coordinator.retention.cancelled": {"fairway coordinator", "fairway dev"},
	} {
		require.Subset(t, onCommands[key], cmds, key)
	}

	// The flags reach the configuration: a bad value is refused naming the
	// key and the flag (exit 1), not as an unknown flag (exit 2).
	code, _, errOut := run(t, "executor", "--max-concurrent", "sleep=two", "--nats-url", "nats://127.0.0.1:1")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `executor.max-concurrent = "sleep=two" (from flag --max-concurrent)`)
	code, _, errOut = run(t, "coordinator", "--retention-failed", "-1h")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `coordinator.retention.failed = "-1h" (from flag --retention-failed): must not be negative`)
}

// TestNegativeNumberIsAnArgument: a negative number in the place of an
// argument reaches the command, which says what is wrong with it (before:
// "unknown shorthand flag: '1' in -1"); one given to a flag stays its value.
func TestNegativeNumberIsAnArgument(t *testing.T) {
	for _, args := range [][]string{
		{"limits", "set", "task", "sleep", "-1"},
		{"limits", "set", "task", "sleep", "-1", "--nats-url", "nats://127.0.0.1:1"},
		{"limits", "set", "--nats-url", "nats://127.0.0.1:1", "task", "sleep", "-1"},
	} {
		code, _, errOut := run(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "MAX -1: must be 0 or more (0 stops new claims); use 'fairway limits delete task sleep' to remove the limit", args)
	}
	code, _, errOut := run(t, "executor", "--prefetch", "-2", "--nats-url", "nats://127.0.0.1:1")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `scheduler.prefetch = "-2" (from flag --prefetch): must be at least -1`)
}

// TestHelpListsTheDemoTasks: the help of fairway dev and fairway executor
// names every demo task their executor runs (dev's left out snooze).
func TestHelpListsTheDemoTasks(t *testing.T) {
	for _, cmd := range []string{"dev", "executor"} {
		code, out, errOut := run(t, cmd, "--help")
		require.Equal(t, 0, code, errOut)
		for _, task := range demo.Tasks() {
			require.Regexp(t, `\b`+task+`\b`, out, "'fairway %s --help' does not name the demo task %s", cmd, task)
		}
	}
}

// TestVersion: 'fairway version' and 'fairway --version' print the build's
// version and Go's.
func TestVersion(t *testing.T) {
	code, out, errOut := run(t, "version")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^fairway \S+\n`, out)
	require.Contains(t, out, runtime.Version())
	code, flagOut, errOut := run(t, "--version")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, out, flagOut)
}

// TestUsageErrorsSuggestAndRequire: a mistyped command gets cobra's
// suggestion, and a missing required input is a usage error (exit 2) on
// every command, before any connection: submit without --group exited 1
// once it could not connect, where jobs show exited 2. 'fairway --help'
// says what the exit codes mean.
func TestUsageErrorsSuggestAndRequire(t *testing.T) {
	for typed, meant := range map[string][]string{
		"submti":                   {"fairway", "submit"},
		"submti echo --group acme": {"fairway", "submit"},
		"jobs shwo ID --group g":   {"fairway jobs", "show"},
		"lmits":                    {"fairway", "limits"},
	} {
		code, _, errOut := run(t, strings.Fields(typed)...)
		require.Equal(t, 2, code, "%s: %s", typed, errOut)
		require.Contains(t, errOut, fmt.Sprintf("unknown command %q for %q", strings.Fields(typed)[len(strings.Fields(meant[0]))-1], meant[0]), typed)
		require.Contains(t, errOut, "Did you mean this?\n\t"+meant[1]+"\n", typed)
	}
	noNATS := "nats://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "echo", "--nats-url", noNATS}, "--group is required"},
		{[]string{"jobs", "show", "ID", "--nats-url", noNATS}, "--group is required"},
		{[]string{"workflow", "submit", "wf.json", "--nats-url", noNATS}, "--group is required"},
		{[]string{"periodic", "add", "nightly", "echo", "--timer", "*-*-* 03:00", "--nats-url", noNATS}, "--group is required"},
		{[]string{"periodic", "add", "nightly", "echo", "--group", "acme", "--nats-url", noNATS}, "--timer is required"},
		{[]string{"jobs", "prune", "--nats-url", noNATS}, "--older-than is required"},
		{[]string{"submit", "--group", "acme", "--nats-url", noNATS}, "accepts 1 arg(s), received 0"},
	} {
		code, _, errOut := run(t, c.args...)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.want, c.args)
	}
	code, out, _ := run(t, "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Exit codes: 0 success; 1 an error")
}

// TestDevHelpGroupsItsFlags: fairway dev's --help lists its seventy flags
// in sections, the common ones first (where its data lives, its ports,
// tenants, external servers), then by what they configure; each flag once.
func TestDevHelpGroupsItsFlags(t *testing.T) {
	code, out, errOut := run(t, "dev", "--help")
	require.Equal(t, 0, code, errOut)
	var sections []string
	seen := map[string]int{}
	flag := regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)`)
	for line := range strings.Lines(out) {
		if strings.HasSuffix(line, ":\n") && !strings.HasPrefix(line, " ") {
			sections = append(sections, strings.TrimSuffix(line, ":\n"))
		}
		if m := flag.FindStringSubmatch(line); m != nil {
			seen[m[1]]++
		}
	}
	require.Equal(t, []string{"Usage", "Common flags", "Scheduling (scheduler.*)", "Executor (executor.*)",
		"Coordinator: quotas, limits, retention (coordinator.*)", "NATS: connection and streams (nats.*)",
		"PostgreSQL (database.*)", "Dashboard and HTTP (web.*)", "Logs and tracing (log.*, tracing.*)", "Other flags", "Global flags"}, sections)
	common := out[strings.Index(out, "Common flags:"):strings.Index(out, "Scheduling (scheduler.*):")]
	for _, name := range []string{"dev-dir", "nats-addr", "pg-port", "web-addr", "tenants", "database-url", "nats-url"} {
		require.Contains(t, common, "--"+name+" ", "a common flag")
	}
	require.Greater(t, len(seen), 60)
	for name, n := range seen {
		require.Equal(t, 1, n, "--%s is listed once", name)
	}
}
