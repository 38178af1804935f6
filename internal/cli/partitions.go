package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/spf13/cobra"
)

// newPartitionsCmd is `fairway partitions`: the journal's partitions.
func newPartitionsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "Show the journal's partitions: their leaders, databases, jobs and how far their events trail",
		Long: `The groups' jobs live in the journal's partitions, each led by one
coordinator at a time through a lease in its database (docs/architecture.md,
"Partitions"). A cluster has database.partitions of them, fixed when it
was created (1 by default), each in the database the partitions map names;
today one coordinator leads them all (partition 0's leader), the others
stand by.

'partitions list' prints, per partition: the coordinator leading it, the
lease's fencing epoch (it grows with each new leader) and the time the
lease has left (a lease that ran out and stays so has no leader: see the
coordinators' logs; one given up by a coordinator that stopped is taken
by another within half a second), its database, the groups with
unfinished jobs, their jobs waiting (or waiting for a retry), running (or
handed to an executor) and held (pending, until released), and how far
its events trail its changes (the rows whose events are not published
yet, and the age of the oldest: a lag that grows says the leader cannot
publish to NATS).`,
	}
	list := e.withConfig(&cobra.Command{
		Use:     "list",
		Short:   "List the partitions: leader, epoch, lease, database, groups, waiting, running and held jobs, event lag",
		Example: `  fairway partitions list`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			parts, err := c.Partitions(cmd.Context())
			if err != nil {
				return describe(err)
			}
			return showPartitions(e.stdout, parts)
		},
	}, clientKeys...)
	cmd.AddCommand(list)
	return cmd
}

// showPartitions prints the partitions as a table.
func showPartitions(out io.Writer, parts []fairway.Partition) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tLEASE\tDATABASE\tGROUPS\tWAITING\tRUNNING\tHELD\tEVENT LAG")
	for _, p := range parts {
		leader, lease := p.Leader, time.Duration(p.LeaseLeftMS)*time.Millisecond
		leaseText := lease.Round(100*time.Millisecond).String() + " left"
		switch {
		case leader == "" && p.Epoch == 0:
			leader, leaseText = "(none yet)", "-"
		case leader == "":
			leader, leaseText = "(none: given up)", "-" // by a coordinator that stopped, or to balance
		case lease <= 0:
			leaseText = "ran out " + (-lease).Round(100*time.Millisecond).String() + " ago"
		}
		waiting := p.Jobs[fairway.StateWaiting] + p.Jobs[fairway.StateStuck]
		running := p.Jobs[fairway.StateScheduled] + p.Jobs[fairway.StateRunning]
		lag := "none"
		if p.UnpublishedRows > 0 {
			lag = fmt.Sprintf("%d rows, %s", p.UnpublishedRows, (time.Duration(p.LagMS) * time.Millisecond).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", p.Partition, leader, strconv.FormatInt(p.Epoch, 10), leaseText, p.Database, p.Groups,
			waiting, running, p.Jobs[fairway.StatePending], lag)
	}
	return w.Flush()
}
