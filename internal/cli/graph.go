package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/spf13/cobra"
)

// writeGraph prints jobs related by depends_on as trees, from the jobs
// that depend on none of the others down to their dependents. A job with
// several dependencies is printed under each; its subtree once, marked
// "(above)" after that. focus is marked with an arrow.
func writeGraph(w io.Writer, jobs []fairway.Job, focus string) {
	byID := make(map[string]*fairway.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	dependents := map[string][]string{}
	var roots []string
	for _, j := range jobs {
		root := true
		for _, d := range j.DependsOn {
			if byID[d] != nil {
				dependents[d] = append(dependents[d], j.ID)
				root = false
			}
		}
		if root {
			roots = append(roots, j.ID)
		}
	}
	printed := map[string]bool{}
	var walk func(id, indent string, last, top bool)
	walk = func(id, indent string, last, top bool) {
		j := byID[id]
		branch, next := "├── ", indent+"│   "
		if last {
			branch, next = "└── ", indent+"    "
		}
		if top {
			branch, next = "", ""
		}
		mark := "  "
		if id == focus {
			mark = "→ "
		}
		line := fmt.Sprintf("%s%s%s%s  %s  %s", mark, indent, branch, id, j.Task, describeState(j, byID))
		if printed[id] && len(dependents[id]) > 0 {
			fmt.Fprintln(w, line+"  (its dependents above)")
			return
		}
		fmt.Fprintln(w, line)
		printed[id] = true
		kids := dependents[id]
		for k, kid := range kids {
			walk(kid, next, k == len(kids)-1, false)
		}
	}
	for _, r := range roots {
		walk(r, "", true, true)
	}
}

// describeState says what a job of a graph is doing: its state, and for a
// blocked job which of its dependencies it still waits for.
func describeState(j *fairway.Job, byID map[string]*fairway.Job) string {
	switch {
	case j.State == fairway.StatePending && len(j.DependsOn) > 0:
		var waits []string
		for _, d := range j.DependsOn {
			if dj := byID[d]; dj == nil || dj.State != fairway.StateSuccess {
				waits = append(waits, d)
			}
		}
		return "pending: waits for " + strings.Join(waits, ", ")
	case j.State == fairway.StateRunning:
		return fmt.Sprintf("running %d%%", j.Progress)
	case j.Error != "" && (j.State == fairway.StateFailed || j.State == fairway.StateCancelled || j.State == fairway.StateStuck):
		return string(j.State) + ": " + firstLine(j.Error)
	}
	return string(j.State)
}

// writeDot prints the graph in Graphviz's language: an edge from each
// dependency to its dependent.
func writeDot(w io.Writer, jobs []fairway.Job, focus string) {
	fmt.Fprintln(w, "digraph jobs {")
	fmt.Fprintln(w, "  rankdir=LR; node [shape=box, style=rounded];")
	in := map[string]bool{}
	for _, j := range jobs {
		in[j.ID] = true
	}
	for _, j := range jobs {
		attrs := fmt.Sprintf("label=%q", j.ID+"\n"+j.Task+" · "+string(j.State))
		if j.ID == focus {
			attrs += ", penwidth=2"
		}
		fmt.Fprintf(w, "  %q [%s];\n", j.ID, attrs)
	}
	for _, j := range jobs {
		for _, d := range slices.Sorted(slices.Values(j.DependsOn)) {
			if in[d] {
				fmt.Fprintf(w, "  %q -> %q;\n", d, j.ID)
			}
		}
	}
	fmt.Fprintln(w, "}")
}

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
			if group == "" {
				return usageError{fmt.Errorf("--group is required: a workflow's jobs belong to one group")}
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

// graphCmd is `fairway jobs graph ID`.
func graphCmd(e *env, jobCmd func(use, short string, run func(cmd *cobra.Command, c *events.Client, id string) error) *cobra.Command) *cobra.Command {
	var dot bool
	cmd := jobCmd("graph", "Show a job with the jobs it depends on and the jobs that depend on it", func(cmd *cobra.Command, c *events.Client, id string) error {
		jobs, err := c.Graph(cmd.Context(), cmd.Flag("group").Value.String(), id)
		if err != nil {
			return err
		}
		if dot {
			writeDot(e.stdout, jobs, id)
		} else {
			writeGraph(e.stdout, jobs, id)
		}
		return nil
	})
	cmd.Flags().BoolVar(&dot, "dot", false, "print Graphviz's dot language (render with: dot -Tsvg)")
	return cmd
}
