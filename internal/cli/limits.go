package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/spf13/cobra"
)

// limitsNow is what the limits commands print: the concurrency limits and
// the rate limits.
type limitsNow struct {
	limits []fairway.Limit
	rates  []fairway.RateLimit
}

// newLimitsCmd is `fairway limits`: the cluster's concurrency and rate
// limits.
func newLimitsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show and set concurrency and rate limits: of a task, or of a group (tenant), across the cluster",
		Long: `A concurrency limit caps the jobs that executors hold (scheduled or running)
at once, across the whole cluster: of one task (say, exports that load an
external service), or of one group, so that no tenant holds more than N
slots ("*" sets the limit of every group without one of its own). A limit
only skips the jobs it caps: an executor with free slots takes the next
eligible job in fair order instead, so no slot stays idle while other work
waits. Limits live in PostgreSQL; every coordinator applies them from its
next claim. An executor's own cap per task is its max-concurrent setting.

A rate limit caps how many jobs start per period, across the cluster: of a
task (task:send-mail), of a group (group:acme; group:* is each group
without a rate of its own, separately), or of a task in a group
(task:send-mail,group:*). Rates are N/s, N/m, N/h, N/d or N per a duration
(5/30s). A job over its rate is skipped like one at its concurrency limit,
and starts as its rate allows.`,
	}
	run := func(f func(cmd *cobra.Command, c *events.Client, args []string) (limitsNow, error)) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			now, err := f(cmd, c, args)
			if err != nil {
				return describe(err)
			}
			return showLimits(e.stdout, now)
		}
	}
	// withRates completes the concurrency limits a change answered with
	// the rate limits, and the other way round.
	withRates := func(cmd *cobra.Command, c *events.Client, limits []fairway.Limit, err error) (limitsNow, error) {
		if err != nil {
			return limitsNow{}, err
		}
		rates, err := c.RateLimits(cmd.Context())
		return limitsNow{limits: limits, rates: rates}, err
	}
	withLimits := func(cmd *cobra.Command, c *events.Client, rates []fairway.RateLimit, err error) (limitsNow, error) {
		if err != nil {
			return limitsNow{}, err
		}
		limits, err := c.Limits(cmd.Context())
		return limitsNow{limits: limits, rates: rates}, err
	}
	list := e.withConfig(&cobra.Command{
		Use: "list", Short: "List the concurrency limits, with the jobs each task or group holds now, and the rate limits", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, c *events.Client, _ []string) (limitsNow, error) {
			limits, err := c.Limits(cmd.Context())
			return withRates(cmd, c, limits, err)
		}),
	}, clientKeys...)
	set := e.withConfig(&cobra.Command{
		Use:   "set task|group NAME MAX | set rate SCOPE RATE",
		Short: "Set a limit: at most MAX jobs of task or group NAME at once (group '*': every group without its own; 0 stops new claims), or at most RATE starts in SCOPE",
		Example: `  fairway limits set task export 5      # at most 5 exports run at once, cluster-wide
  fairway limits set group '*' 20       # no tenant holds more than 20 slots
  fairway limits set group acme 50      # ...except acme
  fairway limits set rate task:send-mail 10/s              # at most 10 send-mail jobs start a second, cluster-wide
  fairway limits set rate 'group:*' 100/m                  # each tenant starts at most 100 jobs a minute
  fairway limits set rate 'task:send-mail,group:*' 5/s     # and at most 5 send-mail jobs a second each`,
		// MAX and RATE are checked before connecting: a mistake in the
		// command line is a usage error (exit 2) whether Fairway runs or not.
		Args: cobra.MatchAll(cobra.ExactArgs(3), func(_ *cobra.Command, args []string) error {
			if args[0] == "rate" {
				if _, _, err := fairway.ParseRate(args[2]); err != nil {
					return fmt.Errorf("RATE %q is not N/period (examples: 10/s, 100/m, 5000/h, 5/30s)", args[2])
				}
			} else if n, err := strconv.Atoi(args[2]); err != nil {
				return fmt.Errorf("MAX %q is not a whole number", args[2])
			} else if n < 0 {
				return fmt.Errorf("MAX %d: must be 0 or more (0 stops new claims); use 'fairway limits delete %s %s' to remove the limit", n, args[0], args[1])
			}
			return nil
		}),
		RunE: run(func(cmd *cobra.Command, c *events.Client, args []string) (limitsNow, error) {
			if args[0] == "rate" {
				rates, err := c.SetRateLimit(cmd.Context(), args[1], args[2])
				return withLimits(cmd, c, rates, err)
			}
			n, _ := strconv.Atoi(args[2]) // checked by Args
			limits, err := c.SetLimit(cmd.Context(), args[0], args[1], n)
			return withRates(cmd, c, limits, err)
		}),
	}, clientKeys...)
	del := e.withConfig(&cobra.Command{
		Use: "delete task|group NAME | delete rate SCOPE", Short: "Remove a limit",
		Example: `  fairway limits delete task export
  fairway limits delete rate task:send-mail`,
		Args: cobra.ExactArgs(2),
		RunE: run(func(cmd *cobra.Command, c *events.Client, args []string) (limitsNow, error) {
			if args[0] == "rate" {
				rates, err := c.DeleteRateLimit(cmd.Context(), args[1])
				return withLimits(cmd, c, rates, err)
			}
			limits, err := c.DeleteLimit(cmd.Context(), args[0], args[1])
			return withRates(cmd, c, limits, err)
		}),
	}, clientKeys...)
	cmd.AddCommand(list, set, del)
	return cmd
}

// showLimits prints the concurrency limits, then the rate limits.
func showLimits(out io.Writer, now limitsNow) error {
	if len(now.limits) == 0 && len(now.rates) == 0 {
		_, err := fmt.Fprintln(out, "(no limits: only executors' slots bound what runs)")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(now.limits) > 0 {
		fmt.Fprintln(w, "KIND\tNAME\tMAX\tHELD NOW")
		for _, l := range now.limits {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", l.Kind, l.Name, l.Max, l.Held)
		}
	} else {
		fmt.Fprintln(w, "(no concurrency limits)")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if len(now.rates) == 0 {
		_, err := fmt.Fprintln(out, "(no rate limits)")
		return err
	}
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RATE LIMIT\tRATE\tCOUNTS THE STARTS OF")
	for _, r := range now.rates {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.Scope(), r.Rate, rateCounts(r))
	}
	return w.Flush()
}

// rateCounts says which starts a rate limit counts.
func rateCounts(r fairway.RateLimit) string {
	switch {
	case r.Group == "":
		return "task " + r.Task + ", across the cluster"
	case r.Task == "" && r.Group == "*":
		return "each group, separately (unless it has its own)"
	case r.Task == "":
		return "group " + r.Group
	case r.Group == "*":
		return "task " + r.Task + " in each group, separately (unless the group has its own for it)"
	}
	return "task " + r.Task + " in group " + r.Group
}
