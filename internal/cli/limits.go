package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/spf13/cobra"
)

// newLimitsCmd is `fairway limits`: the cluster's concurrency limits.
func newLimitsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show and set concurrency limits: of a task, or of a group (tenant), across the cluster",
		Long: `A concurrency limit caps the jobs that executors hold (scheduled or running)
at once, across the whole cluster: of one task (say, exports that load an
external service), or of one group, so that no tenant holds more than N
slots ("*" sets the limit of every group without one of its own). A limit
only skips the jobs it caps: an executor with free slots takes the next
eligible job in fair order instead, so no slot stays idle while other work
waits. Limits live in PostgreSQL; every coordinator applies them from its
next claim. An executor's own cap per task is its max-concurrent setting.`,
	}
	show := func(cmd *cobra.Command, limits []fairway.Limit) error {
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "KIND\tNAME\tMAX\tHELD NOW")
		for _, l := range limits {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", l.Kind, l.Name, l.Max, l.Held)
		}
		if len(limits) == 0 {
			fmt.Fprintln(w, "(no limits: only executors' slots bound what runs)")
		}
		return w.Flush()
	}
	run := func(f func(cmd *cobra.Command, c *events.Client, args []string) ([]fairway.Limit, error)) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			limits, err := f(cmd, c, args)
			if err != nil {
				return describe(err)
			}
			return show(cmd, limits)
		}
	}
	list := e.withConfig(&cobra.Command{
		Use: "list", Short: "List the limits, with the jobs each task or group holds now", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, c *events.Client, _ []string) ([]fairway.Limit, error) {
			return c.Limits(cmd.Context())
		}),
	}, clientKeys...)
	set := e.withConfig(&cobra.Command{
		Use:   "set task|group NAME MAX",
		Short: "Set a limit: at most MAX jobs of task or group NAME at once (group '*': every group without its own; 0 stops new claims)",
		Example: `  fairway limits set task export 5      # at most 5 exports run at once, cluster-wide
  fairway limits set group '*' 20       # no tenant holds more than 20 slots
  fairway limits set group acme 50      # ...except acme`,
		Args: cobra.ExactArgs(3),
		RunE: run(func(cmd *cobra.Command, c *events.Client, args []string) ([]fairway.Limit, error) {
			n, err := strconv.Atoi(args[2])
			if err != nil {
				return nil, usageError{fmt.Errorf("MAX %q is not a whole number", args[2])}
			}
			return c.SetLimit(cmd.Context(), args[0], args[1], n)
		}),
	}, clientKeys...)
	del := e.withConfig(&cobra.Command{
		Use: "delete task|group NAME", Short: "Remove a limit", Args: cobra.ExactArgs(2),
		RunE: run(func(cmd *cobra.Command, c *events.Client, args []string) ([]fairway.Limit, error) {
			return c.DeleteLimit(cmd.Context(), args[0], args[1])
		}),
	}, clientKeys...)
	cmd.AddCommand(list, set, del)
	return cmd
}
