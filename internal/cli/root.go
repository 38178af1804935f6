// Package cli is the fairway command: its subcommands parse flags and
// configuration, wire the parts together and run them. NotifyShutdown turns
// signals into the stages of a shutdown; cmd/fairway only connects it to Main
// and exits with Main's code.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/logging"
	"github.com/fairwayhq/fairway/internal/natsconn"
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// submit --wait: the job ended failed, or cancelled.
	exitJobFailed    = 3
	exitJobCancelled = 4
)

// jobEndError is the end of a job that submit --wait waited for and that
// did not succeed: its exit code says how it ended.
type jobEndError struct {
	job *fairway.Job
}

func (e jobEndError) Error() string {
	return fmt.Sprintf("job %s %s: %s", e.job.ID, e.job.State, cmp.Or(e.job.Error, "(no error given)"))
}

func (e jobEndError) code() int {
	if e.job.State == fairway.StateCancelled {
		return exitJobCancelled
	}
	return exitJobFailed
}

// Main runs the fairway command with args and returns the exit code. ctx
// ending asks the command to stop gracefully; force closing, after that,
// asks an executor to cancel its running jobs at once. force may be nil.
func Main(ctx context.Context, force <-chan struct{}, args []string, stdout, stderr io.Writer) int {
	return MainWithInput(ctx, force, args, os.Stdin, stdout, stderr)
}

// MainWithInput is Main reading stdin from stdin (--args -).
func MainWithInput(ctx context.Context, force <-chan struct{}, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr, force)
	root.SetIn(stdin)
	root.SetArgs(negativesAsArgs(root, args))
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	// Errors may quote a URL or connection string (pgx, nats.go and our
	// own): whatever they hold, no password or token reaches the terminal.
	fmt.Fprintf(stderr, "fairway: %s\n", secret.Mask(err.Error()))
	var usage usageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	var ended jobEndError
	if errors.As(err, &ended) {
		return ended.code()
	}
	return exitError
}

// negativesAsArgs lets a negative number be a positional argument, as in
// 'limits set task sleep -1', which pflag would read as the shorthand flag
// -1: from the first such number on, the positional arguments go after
// "--", where pflag takes every word as it is. A negative number given as
// a flag's value (--prefetch -1) stays where it is.
func negativesAsArgs(root *cobra.Command, args []string) []string {
	if slices.Contains(args, "--") {
		return args
	}
	cmd, _, err := root.Find(args)
	if err != nil {
		return args
	}
	lookup := func(a string) *pflag.Flag {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			if strings.Contains(name, "=") {
				return nil
			}
			if f := cmd.Flags().Lookup(name); f != nil {
				return f
			}
			return cmd.InheritedFlags().Lookup(name)
		}
		if len(a) != 2 {
			return nil // -x=value, or shorthands run together
		}
		if f := cmd.Flags().ShorthandLookup(a[1:]); f != nil {
			return f
		}
		return cmd.InheritedFlags().ShorthandLookup(a[1:])
	}
	var flags, positional []string
	moved := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case isNegativeNumber(a):
			moved = true
			positional = append(positional, a)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			flags = append(flags, a)
			if f := lookup(a); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
				i++
				flags = append(flags, args[i]) // its value
			}
		case moved:
			positional = append(positional, a)
		default:
			flags = append(flags, a) // subcommands and the arguments before
		}
	}
	if !moved {
		return args
	}
	return append(append(flags, "--"), positional...)
}

// isNegativeNumber says whether s is a number with a minus sign: -1, -0.5.
func isNegativeNumber(s string) bool {
	if len(s) < 2 || s[0] != '-' || (s[1] < '0' || s[1] > '9') && s[1] != '.' {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// usageError marks errors in the command line itself.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// env is what every command shares: its output streams, the loaded
// configuration, and the request to stop at once.
type env struct {
	stdout, stderr io.Writer
	force          <-chan struct{}
	configFile     string
	cfg            *config.Config
	log            *slog.Logger
	metricsOnce    sync.Once
	metrics        *prometheus.Registry // see registry
	tracingOnce    sync.Once
	tracing        *sdktrace.TracerProvider // see tracer; nil when tracing is off
	tracingErr     error
}

// registry is the process's Prometheus registry: the coordinator and the
// executor of a process (both, in dev) register into it, with the Go
// runtime's and the process's own metrics.
func (e *env) registry() *prometheus.Registry {
	e.metricsOnce.Do(func() {
		e.metrics = prometheus.NewRegistry()
		e.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	})
	return e.metrics
}

// Command returns the fairway command tree as Main runs it, for programs
// that read its commands and flags: the docs test checks that every flag
// the documentation names exists on its command.
func Command() *cobra.Command { return newRoot(io.Discard, io.Discard, nil) }

func newRoot(stdout, stderr io.Writer, force <-chan struct{}) *cobra.Command {
	e := &env{stdout: stdout, stderr: stderr, force: force}
	root := &cobra.Command{
		Use:   "fairway",
		Short: "Fairway: durable, fair job processing on PostgreSQL and NATS",
		Long: `Fairway stores jobs durably in PostgreSQL, carries submissions, wakeups and
lifecycle events over NATS JetStream, and runs the jobs on a fleet of
executors, fairly: a group (tenant) that submits 10,000 jobs does not make
another group wait.

Start everything in one process for development:

  fairway dev

then, from a second terminal:

  fairway submit echo --group acme --args '{"hello":"world"}'
  fairway events tail

Configuration: built-in defaults < --config file (YAML) < FAIRWAY_* environment
variables < flags. See 'fairway config print' and the README.

Exit codes: 0 success; 1 an error, or Fairway's refusal (an invalid job, an
unknown task, a bad configuration value); 2 a usage error: an unknown
command or flag, a missing argument or required flag, a value that does not
parse; with 'submit --wait', 3 the job failed and 4 it was cancelled.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&e.configFile, "config", "", "YAML configuration file")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// 'fairway submti echo --group acme': the flags are not the
		// mistake, the command is.
		if cmd.HasSubCommands() && cmd.Flags().NArg() > 0 {
			return unknownCommand(cmd, cmd.Flags().Arg(0))
		}
		return usageError{err}
	})
	root.AddCommand(
		newDevCmd(e), newCoordinatorCmd(e), newExecutorCmd(e), newWebCmd(e), newMigrateCmd(e),
		newSubmitCmd(e), newWorkflowCmd(e), newJobsCmd(e), newEventsCmd(e), newExecutorsCmd(e), newLimitsCmd(e), newGroupsCmd(e), newPartitionsCmd(e), newConfigCmd(e), newBenchCmd(e), newPeriodicCmd(e),
		newCalendarCmd(e), newCredsCmd(e), newDeadLettersCmd(e), newBenchNATSCmd(e), newVersionCmd(e),
	)
	usageErrors(root)
	return root
}

// usageErrors makes every mistake in the command line a usageError (exit
// code 2): a wrong number of arguments, and an unknown command at any
// level. A command with subcommands and no action of its own prints its
// help when called alone.
func usageErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		usageErrors(sub)
	}
	if cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		}
		return
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{fmt.Errorf("%s: %w (see '%s --help')", cmd.CommandPath(), err, cmd.CommandPath())}
			}
			return nil
		}
	}
}

// unknownCommand is the usage error of a command's unknown subcommand
// name, with cobra's suggestions of the names it may have meant: the
// usageErrors' action of a command with subcommands replaces cobra's own,
// which suggested them.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q: see '%s --help'", name, cmd.CommandPath(), cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only on its own path
	}
	if suggestions := cmd.SuggestionsFor(name); len(suggestions) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t")
	}
	return usageError{errors.New(msg)}
}

// withConfig registers the flags of keys on cmd and loads the configuration
// before it runs.
func (e *env) withConfig(cmd *cobra.Command, keys ...string) *cobra.Command {
	keys = append([]string{"log.level", "log.format"}, keys...)
	if slices.Contains(keys, "nats.url") {
		keys = append(keys, natsAuthKeys...) // every command that connects to NATS accepts its credentials
		if !slices.Contains(keys, "dev.dir") {
			keys = append(keys, "dev.dir") // and finds the fairway dev of a dev dir (followDev)
		}
	}
	config.AddFlags(cmd.Flags(), keys...)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := config.Load(e.configFile, os.Environ(), cmd.Flags())
		if err != nil {
			return err
		}
		e.cfg = cfg
		e.log, err = logging.New(e.stderr, cfg.Log.Level, cfg.Log.Format)
		if err != nil {
			return err
		}
		if !slices.Contains(startsNATS, cmd.CommandPath()) {
			if err := followDev(cfg, e.log); err != nil {
				return err
			}
		}
		defer e.flushTracing()
		return run(cmd, args)
	}
	return cmd
}

// connect opens a NATS connection that reconnects forever, authenticated
// and secured by the nats.* keys (see natsconn).
func (e *env) connect(name string) (*nats.Conn, error) {
	nc, err := natsconn.Connect(e.cfg.NATS,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				e.log.Warn("disconnected from NATS", "error", secret.Mask(err.Error()))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { e.log.Warn("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		hint := "start it with 'fairway dev'"
		switch record := filepath.Join(e.cfg.Dev.Dir, devStateName); e.cfg.Source("nats.url") {
		case config.SourceDefault:
			hint = fmt.Sprintf("no running 'fairway dev' is recorded in %s: start one, pass the --dev-dir of the one that runs", record)
		case config.SourceDevDir:
			hint = fmt.Sprintf("the 'fairway dev' recorded in %s does not answer", record)
		}
		return nil, fmt.Errorf("%w (is Fairway running? %s, or pass --nats-url and the credentials: --creds, --nkey, --user/--password, --token)", err, hint)
	}
	return nc, nil
}

// client connects a Fairway client for the commands that talk to a running
// Fairway.
func (e *env) client() (*events.Client, func(), error) {
	nc, err := e.connect("fairway-cli")
	if err != nil {
		return nil, nil, err
	}
	c, err := events.NewClient(nc, events.ClientOptions{Prefix: e.cfg.NATS.Prefix, MaxArgsSize: e.cfg.Coordinator.MaxArgsSize})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc.Close, nil
}

// startsNATS are the commands that, without --nats-url, start a NATS
// server of their own: they never follow the record of a running fairway
// dev (followDev); dev writes it.
var startsNATS = []string{"fairway dev", "fairway bench"}

// natsAuthKeys are the keys that authenticate and secure a NATS connection
// (natsconn.Options). withConfig adds them to every command with nats.url.
var natsAuthKeys = []string{"nats.creds", "nats.nkey", "nats.user", "nats.password", "nats.token", "nats.tls-ca", "nats.tls-cert", "nats.tls-key"}

// clientKeys are the configuration keys of commands that talk to a running
// Fairway.
var clientKeys = []string{"nats.url", "nats.prefix"}

// describe renders an error for a user: coded errors say which field.
func describe(err error) error {
	var fe *fairway.Error
	if errors.As(err, &fe) && fe.Code == fairway.CodeInvalid {
		return fmt.Errorf("invalid: %w", err)
	}
	return err
}
