package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// newDeadLettersCmd lists the dead-letter stream. It reads the stream
// directly (JetStream direct gets), so it needs a credential that may read
// the coordinators' streams: an operator's.
func newDeadLettersCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "dead-letters", Short: "Show messages that could never be applied (operators)"}
	var asJSON bool
	var limit int
	list := e.withConfig(&cobra.Command{
		Use:   "list",
		Short: "List the newest dead letters: time, kind, original subject, deliveries, size, reason",
		Long: `List the newest dead letters of the stream <PREFIX>_DEAD, oldest first:
submissions PostgreSQL refused, executor reports that could not be decoded
or applied, events JetStream refused. --json prints each with its body.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := e.connect("fairway-cli")
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			letters, err := events.ListDeadLetters(cmd.Context(), js, events.NewSubjects(e.cfg.NATS.Prefix), limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, letters)
			}
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SEQ\tTIME\tKIND\tSUBJECT\tDELIVERIES\tSIZE\tREASON")
			for _, d := range letters {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%s\n", d.Seq, d.Time.Local().Format(time.DateTime), d.Kind, d.Subject,
					d.Deliveries, d.Size, strings.ReplaceAll(d.Reason, "\n", " "))
			}
			return w.Flush()
		},
	}, clientKeys...)
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON, bodies included")
	list.Flags().IntVar(&limit, "limit", 100, "how many of the newest to list")
	cmd.AddCommand(list)
	return cmd
}
