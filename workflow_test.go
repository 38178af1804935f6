package fairway_test

import (
	"encoding/json"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

func TestWorkflowDecodesFlatJobsAndOrdersThem(t *testing.T) {
	body := `{"jobs":[
		{"ref":"merge","task":"m","depends_on":["a","b","stored-before"]},
		{"ref":"a","task":"p","depends_on":["fetch"]},
		{"ref":"fetch","id":"fetch-1","task":"f"},
		{"ref":"b","task":"p","depends_on":["fetch"]}]}`
	w, err := fairway.DecodeWorkflow([]byte(body), fairway.DefaultMaxArgsSize)
	require.NoError(t, err)
	require.Equal(t, "merge", w.Jobs[0].Ref)
	subs, err := w.Normalize("g", fairway.DefaultMaxArgsSize, 3)
	require.NoError(t, err)
	pos := map[string]int{}
	for i, s := range subs {
		pos[s.ID] = i
		require.Equal(t, "g", s.Group)
	}
	ids := map[string]string{}
	for _, j := range w.Jobs {
		ids[j.Ref] = j.ID
	}
	require.Equal(t, "fetch-1", ids["fetch"], "a job's own id is kept")
	for _, s := range subs {
		for _, d := range s.DependsOn {
			if d != "stored-before" {
				require.Less(t, pos[d], pos[s.ID], "%s comes after its dependency %s", s.ID, d)
			}
		}
	}
	require.Equal(t, []string{ids["a"], ids["b"], "stored-before"}, subs[pos[ids["merge"]]].DependsOn, "refs become ids; other names stay")

	// A job marshals flat again.
	data, err := json.Marshal(w.Jobs[2])
	require.NoError(t, err)
	require.JSONEq(t, `{"ref":"fetch","id":"fetch-1","task":"f","group":"g","args":{},"priority":"low","max_retries":3}`, string(data))
}

func TestWorkflowErrorsNameTheJobAndField(t *testing.T) {
	for _, c := range []struct{ body, field, message string }{
		{`{"jobs":[]}`, "jobs", "at least one job"},
		{`{"jobs":[{"task":"t"}],"x":1}`, "x", "unknown field"},
		{`{"jobs":[{"task":"t"},{"task":"t","bogus":1}]}`, "jobs[1].bogus", "unknown field"},
		{`{"jobs":[{"task":"t","priority":7}]}`, "jobs[0].priority", "must be a string"},
		{`{"jobs":[{"ref":5,"task":"t"}]}`, "jobs[0].ref", "must be a string"},
		{`{"jobs":[3]}`, "jobs[0]", "must be a JSON object"},
		{`{"jobs":[{"ref":"a","task":"t"},{"ref":"a","task":"t"}]}`, "jobs[1].ref", "is the ref of jobs[0] too"},
		{`{"jobs":[{"ref":"a b","task":"t"}]}`, "jobs[0].ref", "contains ' '"},
		{`{"jobs":[{"ref":"a","task":"t","depends_on":["b"]},{"ref":"b","task":"t","depends_on":["a"]}]}`, "jobs[0].depends_on", "cycle (→: depends on): a → b → a"},
		{`{"jobs":[{"ref":"a","task":"t","depends_on":["a"]}]}`, "jobs[0].depends_on[0]", "cannot depend on itself"},
		{`{"jobs":[{"task":"t","depends_on":["x","x"]}]}`, "jobs[0].depends_on[1]", "named twice"},
		{`{"jobs":[{"task":"t","depends_on":["x"],"pending":true}]}`, "jobs[0].depends_on", "not both"},
		{`{"jobs":[{"task":"no such"}]}`, "jobs[0].task", "only letters"},
	} {
		w, err := fairway.DecodeWorkflow([]byte(c.body), fairway.DefaultMaxArgsSize)
		if err == nil {
			_, err = w.Normalize("g", fairway.DefaultMaxArgsSize, 3)
		}
		require.ErrorIs(t, err, fairway.ErrInvalid, c.body)
		require.Equal(t, c.field, fairway.AsError(err).Field, "%s: %v", c.body, err)
		require.Contains(t, fairway.AsError(err).Message, c.message, c.body)
	}
}
