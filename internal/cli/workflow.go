package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/fairwayhq/fairway"
	"github.com/spf13/cobra"
)

// newWorkflowCmd is `fairway workflow submit FILE`.
func newWorkflowCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "workflow", Short: "Submit a workflow: jobs that depend on each other, stored together"}
	var group string
	submit := e.withConfig(&cobra.Command{
		Use:   "submit FILE --group GROUP",
		Short: "Submit the workflow in FILE (JSON; - for standard input): all its jobs, or none",
		Long: `Submit a workflow: {"jobs": [...]}, each job a submission's fields (task,
args, priority, ...) plus "ref", a name the others' "depends_on" may use.
depends_on may also name jobs stored before. The jobs are stored
atomically: when one is refused (the error names it, as jobs[i].field),
none is. Cycles are refused. A job runs once all it depends on succeeded;
if one fails or is cancelled, it is cancelled. Prints each ref and the id
it was stored under.`,
		Example: `  fairway workflow submit report.json --group acme
  echo '{"jobs":[{"ref":"fetch","task":"echo"},{"ref":"parse","task":"echo","depends_on":["fetch"]}]}' |
    fairway workflow submit - --group acme`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.groupOrTenant(cmd, "a workflow's jobs belong to one group"); err != nil {
				return err
			}
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(os.Stdin)
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return fmt.Errorf("reading the workflow: %w", err)
			}
			w, err := fairway.DecodeWorkflow(data, fairway.DefaultMaxArgsSize)
			if err != nil {
				return describe(err)
			}
			for i := range w.Jobs {
				// A job named by neither gets its id here, so that the
				// answer (refs, defaulting to ids) names it.
				if j := &w.Jobs[i]; j.Ref == "" && j.ID == "" {
					j.ID = fairway.NewID()
				}
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			refs, err := c.SubmitWorkflow(cmd.Context(), group, w)
			if err != nil {
				return describe(err)
			}
			for _, j := range w.Jobs {
				ref := j.Ref
				if ref == "" {
					ref = j.ID
				}
				fmt.Fprintf(e.stdout, "%s\t%s\n", ref, refs[ref])
			}
			return nil
		},
	}, clientKeys...)
	submit.Flags().StringVar(&group, "group", "", "the group (tenant) the workflow's jobs belong to (required)")
	cmd.AddCommand(submit)
	return cmd
}
