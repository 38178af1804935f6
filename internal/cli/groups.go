package cli

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/spf13/cobra"
)

// newGroupsCmd is `fairway groups`: each group's weight and its share of
// the executors' slot-time against its weighted fair share.
func newGroupsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Show the groups' (tenants') shares of the executors' time, and set their weights",
		Long: `Each group (tenant) has a weight, 1 unless set: its share of the executors
against the other groups'. A group of weight 3 gets three times the share
of a group of weight 1 while both have work: three jobs for each of the
other's when fairness counts jobs, three times the slot-time when it
counts time (scheduler.fairness, --fairness on fairway dev and fairway
coordinator). Weights live in PostgreSQL; every coordinator follows them
from its next claim.

'groups list' prints, per group, the slot-time its jobs ran over the
window, its share of all groups' slot-time, and its weighted fair share:
its weight over the weights of the groups that ran jobs in the window,
the share it would get if they all had work all the time.`,
	}
	var window string
	list := e.withConfig(&cobra.Command{
		Use:   "list",
		Short: "List each group's weight, slot-time, share of the slot-time and weighted fair share over a window",
		Example: `  fairway groups list                # over the last hour
  fairway groups list --window 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if d, err := time.ParseDuration(window); err != nil || d <= 0 {
				return usageError{fmt.Errorf("--window %q is not a duration such as 10m, 1h or 24h (see '%s --help')", window, cmd.CommandPath())}
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			shares, err := c.Groups(cmd.Context(), window)
			if err != nil {
				return describe(err)
			}
			return showShares(e.stdout, shares, window)
		},
	}, clientKeys...)
	list.Flags().StringVar(&window, "window", "1h", "measure the shares over this last stretch of time (1s to 24h)")
	setWeight := e.withConfig(&cobra.Command{
		Use:   "set-weight GROUP WEIGHT",
		Short: "Set a group's weight (above 0, at most 1000; 1 is the default), then list the groups over the last hour",
		Example: `  fairway groups set-weight acme 3      # acme's share: three times a group of weight 1's
  fairway groups set-weight trial 0.5   # half a share
  fairway groups set-weight acme 1      # back to the default`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			weight, err := strconv.ParseFloat(args[1], 64)
			if err != nil || math.IsNaN(weight) || math.IsInf(weight, 0) {
				return usageError{fmt.Errorf("WEIGHT %q is not a number (examples: 3, 0.5; see '%s --help')", args[1], cmd.CommandPath())}
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			shares, err := c.SetWeight(cmd.Context(), args[0], weight)
			if err != nil {
				return describe(err)
			}
			fmt.Fprintf(e.stdout, "group %s: weight %s\n\n", args[0], formatWeight(weight))
			return showShares(e.stdout, shares, "1h")
		},
	}, clientKeys...)
	cmd.AddCommand(list, setWeight)
	return cmd
}

// showShares prints the groups' shares over window as a table, and says so
// when no job ran in it (the shares are then all 0).
func showShares(out io.Writer, shares []fairway.GroupShare, window string) error {
	ran := 0.0
	for _, s := range shares {
		ran += s.Seconds
	}
	if len(shares) == 0 {
		_, err := fmt.Fprintf(out, "(no job ran in the last %s, and every group has the default weight 1)\n", window)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tWEIGHT\tSLOT-TIME (S)\tSHARE\tFAIR SHARE")
	for _, s := range shares {
		fair := "-" // it ran nothing: it had no share to get
		if s.Seconds > 0 {
			fair = percent(s.FairShare)
		}
		fmt.Fprintf(w, "%s\t%s\t%.1f\t%s\t%s\n", s.Group, formatWeight(s.Weight), s.Seconds, percent(s.Share), fair)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if ran == 0 {
		_, err := fmt.Fprintf(out, "(no job ran in the last %s: there are no shares to show yet, only the weights set)\n", window)
		return err
	}
	return nil
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

// formatWeight writes a weight as short as it reads: 3, 0.5, 1.25.
func formatWeight(w float64) string { return strconv.FormatFloat(w, 'g', -1, 64) }
