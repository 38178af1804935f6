package cli_test

import (
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
