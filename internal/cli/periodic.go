package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/calendar"
	"github.com/spf13/cobra"
)

func newPeriodicCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "periodic",
		Short: "Manage periodic tasks: jobs submitted on a calendar event or a cron schedule",
		Long: `A periodic task submits a job each time its timer comes round: a systemd
calendar event such as 'Mon..Fri *-*-* 08:00', or a standard cron expression
such as '0 8 * * 1-5' (5 fields, 6 with the seconds first, or @hourly, @daily,
@every 30s; in a time zone with a 'CRON_TZ=Europe/Berlin ' prefix; see
'fairway calendar'). The coordinators fire it; one coordinator fires each due
time. While the task's previous job has not ended a due time is skipped; runs
missed while no coordinator ran collapse into one.`,
	}
	var p fairway.PeriodicTask
	var args, priority string
	var disabled bool
	add := e.withConfig(&cobra.Command{
		Use:   "add ID TASK --group GROUP --timer EXPR",
		Short: "Create a periodic task, or replace the one with this id",
		Example: `  fairway periodic add poll-mail poll --group acme --timer '*-*-* *:0/15'
  fairway periodic add report echo --group acme --timer 'Mon *-*-* 07:00 Europe/Berlin' --args '{"kind":"weekly"}'
  fairway periodic add nightly echo --group acme --timer 'CRON_TZ=Europe/Berlin 30 2 * * *'
  fairway periodic add heartbeat echo --group acme --timer '@every 30s'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, pos []string) error {
			switch {
			case p.Group == "":
				return usageError{errors.New("--group is required: the group (tenant) of the periodic task's jobs (see 'fairway periodic add --help')")}
			case p.Timer == "":
				return usageError{errors.New("--timer is required: a calendar event such as '*-*-* 08:00' or a cron expression such as '0 8 * * *' (see 'fairway periodic add --help' and 'fairway calendar')")}
			}
			if _, err := calendar.ParseTimer(p.Timer); err != nil {
				return usageError{fmt.Errorf("--timer: %w (see 'fairway calendar --help')", err)}
			}
			p.ID, p.Task, p.Enabled, p.Priority = pos[0], pos[1], !disabled, fairway.Priority(priority)
			var err error
			if p.Args, err = jsonArgs(cmd, "args", args); err != nil {
				return err
			}
			return e.withClient(func(c *events.Client) error {
				saved, err := c.SavePeriodic(cmd.Context(), p)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "periodic task %s saved; next run %s\n", saved.ID, saved.NextRun.Format(time.RFC3339))
				return nil
			})
		},
	}, clientKeys...)
	f := add.Flags()
	f.StringVar(&p.Group, "group", "", "the group (tenant) of its jobs (required)")
	f.StringVar(&p.Timer, "timer", "", "calendar event ('*-*-* 08:00', 'Mon..Fri *-*-1/7 8:00 Europe/Berlin') or cron expression ('0 8 * * 1-5', 'CRON_TZ=Europe/Berlin 30 2 * * *', '@every 30s') (required)")
	f.StringVar(&args, "args", "", "the jobs' arguments: a JSON object, @FILE to read it from a file, - from stdin")
	f.StringVar(&priority, "priority", "", "high or low (default low)")
	f.StringVar(&p.Subject, "subject", "", "a human description of its jobs")
	f.StringVar(&p.Submitter, "submitter", "", "who submits its jobs")
	f.BoolVar(&disabled, "disabled", false, "create it disabled")

	list := e.withConfig(&cobra.Command{
		Use: "list", Short: "List the periodic tasks", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withClient(func(c *events.Client) error {
				ps, err := c.ListPeriodic(cmd.Context())
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tENABLED\tTASK\tGROUP\tTIMER\tNEXT RUNS")
				for _, p := range ps {
					fmt.Fprintf(w, "%s\t%t\t%s\t%s\t%s\t%s\n", p.ID, p.Enabled, p.Task, p.Group, p.Timer, nextRuns(p))
				}
				return w.Flush()
			})
		},
	}, clientKeys...)

	idCmd := func(use, short, done string, run func(cmd *cobra.Command, c *events.Client, id string) error) *cobra.Command {
		return e.withConfig(&cobra.Command{
			Use: use + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, pos []string) error {
				return e.withClient(func(c *events.Client) error {
					if err := run(cmd, c, pos[0]); err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "periodic task %s %s\n", pos[0], done)
					return nil
				})
			},
		}, clientKeys...)
	}
	enable := idCmd("enable", "Enable a periodic task (it fires at the next time of its timer)", "enabled", func(cmd *cobra.Command, c *events.Client, id string) error {
		_, err := c.SetPeriodic(cmd.Context(), id, true)
		return err
	})
	disable := idCmd("disable", "Disable a periodic task", "disabled", func(cmd *cobra.Command, c *events.Client, id string) error {
		_, err := c.SetPeriodic(cmd.Context(), id, false)
		return err
	})
	runNow := idCmd("run-now", "Fire a periodic task now (and enable it)", "fires now", func(cmd *cobra.Command, c *events.Client, id string) error {
		_, err := c.RunPeriodicNow(cmd.Context(), id)
		return err
	})
	del := idCmd("delete", "Delete a periodic task (its jobs stay)", "deleted", func(cmd *cobra.Command, c *events.Client, id string) error {
		return c.DeletePeriodic(cmd.Context(), id)
	})
	cmd.AddCommand(add, list, enable, disable, runNow, del)
	return cmd
}

// withClient runs fn with a client of the running cluster and turns its
// error into one for the user.
func (e *env) withClient(fn func(c *events.Client) error) error {
	c, closeConn, err := e.client()
	if err != nil {
		return err
	}
	defer closeConn()
	return describe(fn(c))
}

// nextRunsListed is how many coming runs 'periodic list' shows a task.
const nextRunsListed = 3

// nextRuns are the coming runs of an enabled periodic task, in its timer's
// time zone; "-" for a disabled one.
func nextRuns(p fairway.PeriodicTask) string {
	if !p.Enabled {
		return "-"
	}
	timer, err := calendar.ParseTimer(p.Timer)
	if err != nil {
		return p.NextRun.Format(time.RFC3339)
	}
	var out []string
	for _, t := range calendar.Upcoming(timer, p.NextRun, nextRunsListed) {
		out = append(out, t.Format(time.RFC3339))
	}
	return strings.Join(out, ", ")
}
