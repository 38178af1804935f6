package fairway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxWorkflowJobs bounds the jobs of one workflow.
const MaxWorkflowJobs = 1000

// Workflow is a set of jobs submitted together, in one request to
// fairway.api.<group>.workflow, and stored atomically: all of them, or
// none when one is refused. Its jobs may depend on each other by their
// refs (a DAG: cycles are refused) and on jobs stored before.
type Workflow struct {
	Jobs []WorkflowJob `json:"jobs"`
}

// WorkflowJob is one job of a workflow: a submission's fields, plus ref.
type WorkflowJob struct {
	// Ref names the job within the workflow, for the depends_on of the
	// others; defaults to the job's id. Same characters as an id.
	Ref string `json:"ref,omitempty"`
	Submission
}

// MarshalJSON writes the job flat: ref beside the submission's fields.
func (j WorkflowJob) MarshalJSON() ([]byte, error) {
	sub, err := json.Marshal(j.Submission)
	if err != nil || j.Ref == "" {
		return sub, err
	}
	ref, _ := json.Marshal(j.Ref)
	if string(sub) == "{}" {
		return []byte(`{"ref":` + string(ref) + `}`), nil
	}
	return []byte(`{"ref":` + string(ref) + "," + string(sub[1:])), nil
}

// DecodeWorkflow parses a workflow body as strictly as DecodeSubmission
// parses a submission: unknown fields and wrong types are errors naming
// the field (jobs[i].field).
func DecodeWorkflow(data []byte, maxArgs int64) (Workflow, error) {
	var raw struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Workflow{}, decodeError(err)
	}
	if dec.More() {
		return Workflow{}, Invalid("body", "unexpected data after the JSON object")
	}
	switch {
	case len(raw.Jobs) == 0:
		return Workflow{}, Invalid("jobs", "missing: a workflow needs at least one job")
	case len(raw.Jobs) > MaxWorkflowJobs:
		return Workflow{}, Invalid("jobs", "%d jobs exceeds the limit of %d", len(raw.Jobs), MaxWorkflowJobs)
	}
	w := Workflow{Jobs: make([]WorkflowJob, len(raw.Jobs))}
	for i, item := range raw.Jobs {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
			return Workflow{}, Invalid(fmt.Sprintf("jobs[%d]", i), "must be a JSON object")
		}
		if ref, ok := fields["ref"]; ok {
			if err := json.Unmarshal(ref, &w.Jobs[i].Ref); err != nil {
				return Workflow{}, Invalid(fmt.Sprintf("jobs[%d].ref", i), "must be a string")
			}
			delete(fields, "ref")
		}
		rest, _ := json.Marshal(fields)
		sub, err := DecodeSubmission(rest, maxArgs)
		if err != nil {
			return Workflow{}, inJob(i, err)
		}
		w.Jobs[i].Submission = sub
	}
	return w, nil
}

// inJob prefixes the field of an error about a workflow's job i:
// jobs[i].field.
func inJob(i int, err error) error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Field = fmt.Sprintf("jobs[%d]", i)
		if e.Field != "" && e.Field != "body" {
			c.Field += "." + e.Field
		}
		return &c
	}
	return err
}

// NameJob returns err, refusing one of the workflow's jobs (its JobID),
// with the field naming that job: jobs[i].field. Other errors, and
// internal or unavailable ones, are returned as they are.
func (w *Workflow) NameJob(err error) error {
	e := AsError(err)
	if e.Code == CodeInternal || e.Code == CodeUnavailable {
		return err
	}
	for i, j := range w.Jobs {
		if j.ID == e.JobID {
			return inJob(i, e)
		}
	}
	return err
}

// Normalize checks the workflow's jobs for the group of the subject
// (Submission.Normalize, with a task in each body), resolves each
// depends_on entry that names another job's ref to that job's id, refuses
// cycles, and returns the submissions in an order where each comes after
// the jobs of the workflow it depends on. Entries that name no ref stay
// as they are: ids of jobs stored already, which the store checks.
func (w *Workflow) Normalize(group string, maxArgs int64, defaultRetries int) ([]Submission, error) {
	n := len(w.Jobs)
	byRef := make(map[string]int, n)
	for i := range w.Jobs {
		j := &w.Jobs[i]
		if err := j.Normalize(group, "", maxArgs, defaultRetries); err != nil {
			return nil, inJob(i, err)
		}
		if j.Ref == "" {
			j.Ref = j.ID
		} else if err := checkID(j.Ref); err != nil {
			return nil, inJob(i, Invalid("ref", "%s", AsError(err).Message))
		}
		if prev, ok := byRef[j.Ref]; ok {
			return nil, inJob(i, Invalid("ref", "%q is the ref of jobs[%d] too: refs name one job each", j.Ref, prev))
		}
		byRef[j.Ref] = i
	}
	ids := make(map[string]int, n)
	for i, j := range w.Jobs {
		if prev, ok := ids[j.ID]; ok {
			return nil, inJob(i, Invalid("id", "%q is the id of jobs[%d] too", j.ID, prev))
		}
		ids[j.ID] = i
	}
	// Edges within the workflow, by index; refs become ids.
	within := make([][]int, n)
	for i := range w.Jobs {
		j := &w.Jobs[i]
		for k, dep := range j.DependsOn {
			if d, ok := byRef[dep]; ok {
				if d == i {
					return nil, inJob(i, Invalid(fmt.Sprintf("depends_on[%d]", k), "job %s cannot depend on itself", dep))
				}
				within[i] = append(within[i], d)
				j.DependsOn[k] = w.Jobs[d].ID
			}
		}
	}
	order, cycle := topoOrder(within)
	if cycle != nil {
		refs := make([]string, 0, len(cycle)+1)
		for _, i := range cycle {
			refs = append(refs, w.Jobs[i].Ref)
		}
		refs = append(refs, refs[0])
		return nil, inJob(cycle[0], Invalid("depends_on", "the workflow's dependencies form a cycle (→: depends on): %s", strings.Join(refs, " → ")))
	}
	subs := make([]Submission, n)
	for k, i := range order {
		subs[k] = w.Jobs[i].Submission
	}
	return subs, nil
}

// topoOrder orders the nodes 0..n-1 so that each comes after the nodes it
// depends on (deps[i]), keeping the given order where it may. When the
// dependencies form a cycle it returns one, each node depending on the next
// and the last on the first.
func topoOrder(deps [][]int) (order, cycle []int) {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]int, len(deps))
	var stack []int
	var visit func(i int) []int
	visit = func(i int) []int {
		switch mark[i] {
		case done:
			return nil
		case open:
			at := len(stack) - 1
			for stack[at] != i {
				at--
			}
			return append([]int(nil), stack[at:]...)
		}
		mark[i] = open
		stack = append(stack, i)
		for _, d := range deps[i] {
			if c := visit(d); c != nil {
				return c
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		order = append(order, i)
		return nil
	}
	for i := range deps {
		if c := visit(i); c != nil {
			return nil, c
		}
	}
	return order, nil
}
