package cli

import (
	"fmt"
	"io"
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

// graphCmd is `fairway jobs graph ID`.
func graphCmd(e *env, jobCmd func(use, short string, run func(cmd *cobra.Command, c *events.Client, id string) error) *cobra.Command) *cobra.Command {
	var dot bool
	cmd := jobCmd("graph", "Show a job with the jobs it depends on and the jobs that depend on it", func(cmd *cobra.Command, c *events.Client, id string) error {
		jobs, truncated, err := c.GraphTruncated(cmd.Context(), cmd.Flag("group").Value.String(), id)
		if err != nil {
			return err
		}
		if truncated != "" {
			fmt.Fprintln(e.stderr, "warning:", truncated)
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
