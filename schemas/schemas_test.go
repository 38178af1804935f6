package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// mode says who writes a body, which decides what its schema must say.
type mode int

const (
	// written: Go encodes the body (coordinators, or the Go executor)
	// and others read it. Its schema requires exactly the fields Go always
	// writes (those without omitempty), at every level; new fields may
	// appear, so its top level does not refuse unknown ones.
	written mode = iota
	// strict: the coordinator decodes the body and refuses unknown fields
	// (fairway.DecodeSubmission, coordinator's decode). Its schema refuses
	// them too, at every level, and requires only fields Go always writes.
	strict
)

// bodies pairs each schema with the Go type of its body. A schema file
// missing here, or a Go field missing from its schema, fails the test.
var bodies = []struct {
	file string
	typ  reflect.Type
	mode mode
}{
	{"submission.json", typeOf[fairway.Submission](), strict},
	{"job.json", typeOf[fairway.Job](), written},
	{"event.json", typeOf[fairway.Event](), written},
	{"progress.json", typeOf[fairway.Progress](), written},
	{"error.json", typeOf[fairway.Error](), written},
	{"log-line.json", typeOf[fairway.LogLine](), written},
	{"executor.json", typeOf[fairway.Executor](), strict},
	{"periodic-task.json", typeOf[fairway.PeriodicTask](), strict},
	{"stats.json", typeOf[fairway.Stats](), written},
	{"api-reply.json", typeOf[events.Reply](), written},
	{"api-job-request.json", typeOf[events.JobRequest](), strict},
	{"api-wait-request.json", typeOf[events.WaitRequest](), strict},
	{"api-list-request.json", typeOf[events.ListRequest](), strict},
	{"api-logs-request.json", typeOf[events.LogsRequest](), strict},
	{"api-bulk-request.json", typeOf[events.BulkRequest](), strict},
	{"api-stats-request.json", typeOf[events.StatsRequest](), strict},
	{"api-prune-request.json", typeOf[events.PruneRequest](), strict},
	{"api-pause-request.json", typeOf[events.PauseCommand](), strict},
	{"api-drain-request.json", typeOf[events.DrainRequest](), strict},
	{"executor-register.json", typeOf[events.RegisterRequest](), strict},
	{"executor-deregister.json", typeOf[events.DeregisterRequest](), strict},
	{"executor-dispatch.json", typeOf[events.DispatchRequest](), strict},
	{"executor-dispatch-reply.json", typeOf[events.DispatchReply](), written},
	{"executor-heartbeat.json", typeOf[events.Heartbeat](), strict},
	{"executor-report.json", typeOf[events.Report](), written},
	{"executor-cancel.json", typeOf[events.CancelCommand](), written},
	{"limit.json", typeOf[fairway.Limit](), written},
	{"api-limit-request.json", typeOf[events.LimitRequest](), strict},
	{"rate-limit.json", typeOf[fairway.RateLimit](), written},
	{"group-share.json", typeOf[fairway.GroupShare](), written},
	{"partition.json", typeOf[fairway.Partition](), written},
	{"api-groups-request.json", typeOf[events.GroupsRequest](), strict},
	{"api-weight-request.json", typeOf[events.WeightRequest](), strict},
	{"api-rate-request.json", typeOf[events.RateRequest](), strict},
	{"workflow.json", typeOf[fairway.Workflow](), strict},
}

// untyped are the schema files of no Go type of their own: checked by
// compiling them and by the bodies validated against them.
var untyped = []string{"defs.json", "executor-results.json", "event-message.json", "submit-message.json"}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

var (
	timeType = typeOf[time.Time]()
	rawType  = typeOf[json.RawMessage]()
)

// schemaSet is every schema file, parsed, by file name.
type schemaSet map[string]map[string]any

func loadSchemas(t *testing.T) schemaSet {
	t.Helper()
	set := schemaSet{}
	names, err := fs.Glob(FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, err := FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		set[name] = doc
	}
	return set
}

// node is a schema object and the file it is in (for its $refs).
type node struct {
	file string
	m    map[string]any
}

// at returns the schema at ref ("file.json", "file.json#/pointer" or
// "#/pointer"), relative to the file from.
func (s schemaSet) at(from, ref string) (node, error) {
	file, pointer, _ := strings.Cut(ref, "#")
	if file == "" {
		file = from
	}
	var v any = s[file]
	if s[file] == nil {
		return node{}, fmt.Errorf("%s: $ref %q: no file %s", from, ref, file)
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if tok == "" {
			continue
		}
		m, _ := v.(map[string]any)
		if v = m[tok]; v == nil {
			return node{}, fmt.Errorf("%s: $ref %q: nothing at %s", from, ref, tok)
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return node{}, fmt.Errorf("%s: $ref %q is not a schema object", from, ref)
	}
	return node{file, m}, nil
}

// chain is a schema followed by the schemas its $ref leads to: what
// applies to one value. Keywords are read from the first that has them;
// required adds up.
type chain []node

func (s schemaSet) chain(t *testing.T, n node) chain {
	c := chain{n}
	for len(c) < 10 {
		ref, ok := c[len(c)-1].m["$ref"].(string)
		if !ok {
			return c
		}
		next, err := s.at(c[len(c)-1].file, ref)
		if err != nil {
			t.Error(err)
			return c
		}
		c = append(c, next)
	}
	t.Errorf("%s: $ref loop", n.file)
	return c
}

func (c chain) get(key string) (any, node) {
	for _, n := range c {
		if v, ok := n.m[key]; ok {
			return v, n
		}
	}
	return nil, node{}
}

func (c chain) types() []string {
	switch v, _ := c.get("type"); v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var ts []string
		for _, x := range v {
			ts = append(ts, fmt.Sprint(x))
		}
		return ts
	}
	return nil // any JSON value
}

func (c chain) required() []string {
	var names []string
	for _, n := range c {
		for _, r := range asSlice(n.m["required"]) {
			names = append(names, fmt.Sprint(r))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// field is one JSON field of a Go struct.
type field struct {
	name      string
	typ       reflect.Type
	index     []int
	omitempty bool
}

// jsonFields lists the fields encoding/json reads and writes for t: by
// json tag or Go name, those tagged "-" and unexported ones left out,
// embedded structs' fields promoted.
func jsonFields(t reflect.Type) []field {
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for _, inner := range jsonFields(f.Type) {
				inner.index = append([]int{i}, inner.index...)
				fields = append(fields, inner)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		fields = append(fields, field{name: name, typ: f.Type, index: []int{i}, omitempty: omit})
	}
	return fields
}

// nilable says whether encoding/json may write null for a value of t.
func nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// checker compares schemas with Go types.
type checker struct {
	t   *testing.T
	set schemaSet
}

// value checks that the schema n describes values of Go type typ, as
// encoding/json writes them; null only when Go may write it.
func (c checker) value(path string, n node, typ reflect.Type, nullable bool, m mode, top bool) {
	ch := c.set.chain(c.t, n)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	types := ch.types()
	if typ == rawType {
		// Any JSON value Go holds as it is: the schema says which.
		if types != nil && nullable && !slices.Contains(types, "null") {
			c.t.Errorf("%s: Go writes null for a nil %s: type must allow null", path, typ)
		}
		return
	}
	if types == nil {
		c.t.Errorf("%s: no type (Go type %s)", path, typ)
		return
	}
	switch hasNull := slices.Contains(types, "null"); {
	case nullable && !hasNull:
		c.t.Errorf("%s: type %v: Go writes null for a nil %s without omitempty: allow \"null\"", path, types, typ)
	case !nullable && hasNull:
		c.t.Errorf("%s: type %v: Go never writes null here: drop \"null\"", path, types)
	}
	types = slices.DeleteFunc(slices.Clone(types), func(s string) bool { return s == "null" })
	var want string
	switch {
	case typ == timeType:
		want = "string"
		if f, _ := ch.get("format"); f != "date-time" {
			c.t.Errorf("%s: a time.Time needs format date-time, not %v", path, f)
		}
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want = "integer"
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		want = "number"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() == reflect.Slice:
		want = "array"
		c.elements(path+"[]", ch, "items", typ.Elem(), m)
	case typ.Kind() == reflect.Struct:
		want = "object"
		c.object(path, ch, typ, m, top)
	case typ.Kind() == reflect.Map && typ.Key().Kind() == reflect.String:
		want = "object"
		c.elements(path+"{}", ch, "additionalProperties", typ.Elem(), m)
	default:
		c.t.Errorf("%s: Go type %s has no JSON Schema counterpart here yet", path, typ)
		return
	}
	if !slices.Equal(types, []string{want}) {
		c.t.Errorf("%s: type %v, but Go type %s is %q", path, types, typ, want)
	}
}

// elements checks the schema under key (items of an array, or
// additionalProperties: the values of a map) against the Go type elem.
func (c checker) elements(path string, ch chain, key string, elem reflect.Type, m mode) {
	sub, owner := ch.get(key)
	sm, ok := sub.(map[string]any)
	if !ok {
		c.t.Errorf("%s: needs %s, the schema of its elements (Go type %s)", path, key, elem)
		return
	}
	c.value(path, node{owner.file, sm}, elem, false, m, false)
}

// object checks that the schema ch has exactly the JSON fields of struct
// typ as properties, each with a description, and that required and
// additionalProperties follow the body's mode.
func (c checker) object(path string, ch chain, typ reflect.Type, m mode, top bool) {
	propsV, owner := ch.get("properties")
	props, _ := propsV.(map[string]any)
	var always []string
	for _, f := range jsonFields(typ) {
		if !f.omitempty {
			always = append(always, f.name)
		}
		pv, ok := props[f.name]
		if !ok {
			c.t.Errorf("%s: Go field %s.%s (json %q, %s) has no property in the schema", path, typ, fieldName(typ, f), f.name, f.typ)
			continue
		}
		pm, _ := pv.(map[string]any)
		pn := node{owner.file, pm}
		if d, _ := c.set.chain(c.t, pn).get("description"); d == nil || d == "" {
			c.t.Errorf("%s.%s: no description", path, f.name)
		}
		c.value(path+"."+f.name, pn, f.typ, !f.omitempty && nilable(f.typ), m, false)
	}
	for name := range props {
		if !slices.ContainsFunc(jsonFields(typ), func(f field) bool { return f.name == name }) {
			c.t.Errorf("%s: property %q is no JSON field of Go type %s", path, name, typ)
		}
	}
	slices.Sort(always)
	required := ch.required()
	for _, r := range required {
		if !slices.Contains(always, r) {
			c.t.Errorf("%s: %q is required, but Go may leave it out (omitempty, or no such field)", path, r)
		}
	}
	additional, _ := ch.get("additionalProperties")
	switch m {
	case written:
		if !slices.Equal(required, always) {
			c.t.Errorf("%s: required %v, but Go always writes %v", path, required, always)
		}
		if additional == false && top {
			c.t.Errorf("%s: a body Go writes may grow: do not refuse unknown fields", path)
		}
	case strict:
		if additional != false {
			c.t.Errorf("%s: the coordinator refuses unknown fields here: set additionalProperties to false", path)
		}
	}
}

func fieldName(t reflect.Type, f field) string { return t.FieldByIndex(f.index).Name }

// TestSchemasMatchGoTypes holds every schema to its Go type: the same
// fields both ways, JSON types matching Go kinds, null where Go writes
// it, required fields Go always writes, unknown fields refused where the
// coordinator refuses them.
func TestSchemasMatchGoTypes(t *testing.T) {
	set := loadSchemas(t)
	listed := slices.Clone(untyped)
	for _, b := range bodies {
		listed = append(listed, b.file)
		doc, ok := set[b.file]
		if !ok {
			t.Errorf("%s: no such schema file", b.file)
			continue
		}
		c := checker{t, set}
		c.value(b.file, node{b.file, doc}, b.typ, false, b.mode, true)
	}
	for name := range set {
		if !slices.Contains(listed, name) {
			t.Errorf("%s: not in the test's bodies (nor untyped): pair it with its Go type", name)
		}
	}
}

// TestSchemaFiles checks what every file must say of itself.
func TestSchemaFiles(t *testing.T) {
	for name, doc := range loadSchemas(t) {
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %v: use draft 2020-12", name, doc["$schema"])
		}
		if doc["$id"] != Base+name {
			t.Errorf("%s: $id %v, want %s", name, doc["$id"], Base+name)
		}
		for _, key := range []string{"title", "description"} {
			if s, _ := doc[key].(string); s == "" {
				t.Errorf("%s: no %s", name, key)
			}
		}
	}
}

// TestSchemasMatchGoValues checks the enums and limits of the schemas
// against the Go constants they come from.
func TestSchemasMatchGoValues(t *testing.T) {
	set := loadSchemas(t)
	var states, final []string
	for _, s := range fairway.States {
		states = append(states, string(s))
		if s.Final() {
			final = append(final, string(s))
		}
	}
	var outcomes []string
	for _, o := range []fairway.Outcome{fairway.OutcomeSuccess, fairway.OutcomeError, fairway.OutcomePermanent,
		fairway.OutcomeCancelled, fairway.OutcomeReleased, fairway.OutcomeSnoozed, fairway.OutcomeLost} {
		if o.Reportable() {
			outcomes = append(outcomes, string(o))
		}
	}
	enums := []struct {
		ref  string
		want []string
	}{
		{"defs.json#/$defs/jobState", states},
		{"defs.json#/$defs/eventState", append(slices.Clone(states), string(fairway.StateRejected), string(fairway.StateFired), string(fairway.StateSkipped))},
		{"defs.json#/$defs/finalState", final},
		{"defs.json#/$defs/priority", strs(fairway.PriorityHigh, fairway.PriorityLow)},
		{"defs.json#/$defs/code", strs(fairway.CodeInvalid, fairway.CodeNotFound, fairway.CodeDuplicate, fairway.CodeConflict,
			fairway.CodeUnavailable, fairway.CodeInternal, fairway.CodeQuota, fairway.CodeNotRegistered)},
		{"defs.json#/$defs/outcome", outcomes},
		{"defs.json#/$defs/executorState", strs(fairway.ExecutorLive, fairway.ExecutorGone, fairway.ExecutorDeregistered)},
		{"executor-report.json#/properties/type", strs(events.ReportStarted, events.ReportProgress, events.ReportLog, events.ReportDone)},
		{"api-bulk-request.json#/properties/action", strs(events.BulkCancel, events.BulkRetry, events.BulkRelease)},
	}
	for _, e := range enums {
		n, err := set.at("", e.ref)
		if err != nil {
			t.Error(err)
			continue
		}
		var got []string
		for _, v := range asSlice(n.m["enum"]) {
			got = append(got, fmt.Sprint(v))
		}
		if !slices.Equal(got, e.want) {
			t.Errorf("%s: enum %v, Go has %v", e.ref, got, e.want)
		}
	}
	limits := []struct {
		ref, key string
		want     int
	}{
		{"defs.json#/$defs/name", "maxLength", fairway.MaxNameLength},
		{"defs.json#/$defs/jobId", "maxLength", fairway.MaxIDLength},
		{"submission.json#/properties/subject", "maxLength", fairway.MaxSubjectLength},
		{"submission.json#/properties/submitter", "maxLength", fairway.MaxSubmitterLength},
		{"submission.json#/properties/tracker", "maxLength", fairway.MaxTrackerLength},
		{"submission.json#/properties/max_retries", "maximum", fairway.MaxRetriesLimit},
		{"periodic-task.json#/properties/subject", "maxLength", fairway.MaxSubjectLength},
		{"periodic-task.json#/properties/submitter", "maxLength", fairway.MaxSubmitterLength},
		{"api-list-request.json#/properties/limit", "maximum", store.ListLimitMax},
		{"api-logs-request.json#/properties/limit", "maximum", store.LogsLimitMax},
		{"api-bulk-request.json#/properties/limit", "maximum", events.BulkLimitMax},
		{"api-prune-request.json#/properties/limit", "maximum", 10_000}, // coordinator's pruneMaxBatch
	}
	for _, l := range limits {
		n, err := set.at("", l.ref)
		if err != nil {
			t.Error(err)
			continue
		}
		if got, _ := n.m[l.key].(float64); int(got) != l.want {
			t.Errorf("%s: %s %v, Go's limit is %d", l.ref, l.key, n.m[l.key], l.want)
		}
	}
}

func strs[S ~string](v ...S) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = string(s)
	}
	return out
}

// TestDurationPattern checks that the duration pattern takes what
// time.ParseDuration takes, without a sign.
func TestDurationPattern(t *testing.T) {
	n, err := loadSchemas(t).at("", "defs.json#/$defs/duration")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(n.m["pattern"].(string))
	for _, s := range []string{"0", "30s", "15m", "2h", "1h30m", "2.5h", ".5s", "1.s", "300ms", "10us", "10µs", "10μs", "5ns",
		"", "1", "s", ".s", "-1s", "+1s", "1d", "10 minutes", "1h 30m", "1e3s", "0s", "00:30"} {
		_, err := time.ParseDuration(s)
		want := err == nil && !strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "+")
		if got := re.MatchString(s); got != want {
			t.Errorf("duration %q: pattern matches %v, time.ParseDuration takes it unsigned %v", s, got, want)
		}
	}
}

// compiled compiles every schema with a JSON Schema validator, asserting
// formats (date-time).
func compiled(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	names, err := fs.Glob(FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, _ := FS.ReadFile(name)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.AddResource(Base+name, doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range names {
		sch, err := c.Compile(Base + name)
		if err != nil {
			t.Errorf("%s does not compile: %v", name, err)
			continue
		}
		out[name] = sch
	}
	return out
}

func validate(schemas map[string]*jsonschema.Schema, file string, body []byte) error {
	sch, ok := schemas[file]
	if !ok {
		return fmt.Errorf("no schema %s", file)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// TestFullBodiesValidate fills every field of each Go type (from its
// schema: the first enum value or example where there is one) and
// validates the JSON Go writes for it.
func TestFullBodiesValidate(t *testing.T) {
	set, schemas := loadSchemas(t), compiled(t)
	for _, b := range bodies {
		v := reflect.New(b.typ).Elem()
		f := filler{t, set}
		f.fill(b.file, v, node{b.file, set[b.file]})
		data, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatalf("%s: %v", b.file, err)
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(data, &keys)
		for _, f := range jsonFields(b.typ) {
			if _, ok := keys[f.name]; !ok {
				t.Errorf("%s: the full body leaves out %q", b.file, f.name)
			}
		}
		if err := validate(schemas, b.file, data); err != nil {
			t.Errorf("%s: a full %s does not validate: %v\n%s", b.file, b.typ, err, data)
		}
		if b.typ == typeOf[fairway.Submission]() {
			for _, msg := range [][]byte{data, []byte("[" + string(data) + "," + string(data) + "]")} {
				if err := validate(schemas, "submit-message.json", msg); err != nil {
					t.Errorf("submit-message.json: %v\n%s", err, msg)
				}
			}
		}
		if b.typ == typeOf[fairway.Event]() {
			batch := []byte("[" + string(data) + "," + string(data) + "]")
			for _, msg := range [][]byte{data, batch} {
				if err := validate(schemas, "event-message.json", msg); err != nil {
					t.Errorf("event-message.json: %v\n%s", err, msg)
				}
				if evs, err := events.DecodeEvents(msg); err != nil || len(evs) == 0 {
					t.Errorf("events.DecodeEvents refuses %s: %v", msg, err)
				}
			}
		}
		if b.typ == typeOf[events.Report]() {
			for _, msg := range [][]byte{data, []byte("[" + string(data) + "," + string(data) + "]")} {
				if err := validate(schemas, "executor-results.json", msg); err != nil {
					t.Errorf("executor-results.json: %v\n%s", err, msg)
				}
			}
			if _, err := events.DecodeReports(data); err != nil {
				t.Errorf("events.DecodeReports refuses a full report: %v", err)
			}
		}
	}
}

// filler sets every field of a Go value to a value its schema allows.
type filler struct {
	t   *testing.T
	set schemaSet
}

var sampleTime = time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)

func (f filler) fill(path string, v reflect.Value, n node) {
	ch := f.set.chain(f.t, n)
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	first := func(key string) any {
		x, _ := ch.get(key)
		if s := asSlice(x); len(s) > 0 {
			return s[0]
		}
		return nil
	}
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(sampleTime))
	case v.Type() == rawType:
		if ts := ch.types(); ts == nil || slices.Contains(ts, "object") {
			v.SetBytes([]byte(`{"hello":"world"}`))
		} else {
			f.t.Errorf("%s: no sample for a raw value of type %v", path, ts)
		}
	case v.Kind() == reflect.String:
		s := "sample"
		if x := first("enum"); x != nil {
			s = fmt.Sprint(x)
		} else if x := first("examples"); x != nil {
			s = fmt.Sprint(x)
		}
		v.SetString(s)
	case v.CanInt():
		i := 1.0
		if x, _ := ch.get("maximum"); x != nil {
			i = min(i, x.(float64))
		}
		if x, _ := ch.get("minimum"); x != nil {
			i = max(i, x.(float64))
		}
		v.SetInt(int64(i))
	case v.CanFloat():
		v.SetFloat(1.5)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Slice:
		items, owner := ch.get("items")
		im, _ := items.(map[string]any)
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		f.fill(path+"[]", v.Index(0), node{owner.file, im})
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		values, owner := ch.get("additionalProperties")
		vm, _ := values.(map[string]any)
		elem := reflect.New(v.Type().Elem()).Elem()
		f.fill(path+"{}", elem, node{owner.file, vm})
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(reflect.ValueOf("sample").Convert(v.Type().Key()), elem)
	case v.Kind() == reflect.Struct:
		propsV, owner := ch.get("properties")
		props, _ := propsV.(map[string]any)
		for _, fl := range jsonFields(v.Type()) {
			pm, _ := props[fl.name].(map[string]any)
			f.fill(path+"."+fl.name, v.FieldByIndex(fl.index), node{owner.file, pm})
		}
	default:
		f.t.Errorf("%s: no sample for Go type %s", path, v.Type())
	}
}

// docExamples are the schemas of the ```json blocks of docs/nats-api.md,
// value by value, in order.
var docExamples = []string{"submission.json", "api-reply.json", "job.json", "event.json", "event-message.json", "progress.json"}

// TestDocExamplesValidate validates the JSON examples of the wire
// contract's documentation against their schemas.
func TestDocExamplesValidate(t *testing.T) {
	schemas := compiled(t)
	doc, err := os.ReadFile("../docs/nats-api.md")
	if err != nil {
		t.Fatal(err)
	}
	var values []json.RawMessage
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1) {
		dec := json.NewDecoder(bytes.NewReader(m[1]))
		for dec.More() {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("docs/nats-api.md: a json block is not JSON: %v\n%s", err, m[1])
			}
			values = append(values, v)
		}
	}
	if len(values) != len(docExamples) {
		t.Fatalf("docs/nats-api.md has %d JSON examples, docExamples names %d: list each one's schema", len(values), len(docExamples))
	}
	for i, v := range values {
		if err := validate(schemas, docExamples[i], v); err != nil {
			t.Errorf("docs/nats-api.md example %d does not validate against %s: %v\n%s", i+1, docExamples[i], err, v)
		}
	}
	// The submission example is one the coordinator takes, too.
	sub, err := fairway.DecodeSubmission(values[0], fairway.DefaultMaxArgsSize)
	if err == nil {
		err = sub.Normalize("acme", "echo", fairway.DefaultMaxArgsSize, 3)
	}
	if err != nil {
		t.Errorf("docs/nats-api.md's submission example: the coordinator refuses it: %v", err)
	}
}

// TestInvalidBodiesRefused checks that the schemas refuse bodies the
// contract refuses; for submissions, that Go refuses them too, naming
// the same field.
func TestInvalidBodiesRefused(t *testing.T) {
	schemas := compiled(t)
	long := strings.Repeat("a", fairway.MaxNameLength+1)
	submissions := []struct{ field, body string }{
		{"colour", `{"task":"echo","group":"acme","colour":"red"}`},
		{"max_retries", `{"task":"echo","group":"acme","max_retries":"3"}`},
		{"max_retries", `{"task":"echo","group":"acme","max_retries":101}`},
		{"group", `{"task":"echo","group":"` + long + `"}`},
		{"task", `{"task":"echo now","group":"acme"}`},
		{"id", `{"task":"echo","group":"acme","id":"a/b"}`},
		{"priority", `{"task":"echo","group":"acme","priority":"urgent"}`},
		{"run_at", `{"task":"echo","group":"acme","run_at":"tomorrow"}`},
		{"timeout", `{"task":"echo","group":"acme","timeout":"10 minutes"}`},
		{"args", `{"task":"echo","group":"acme","args":[1,2]}`},
		{"subject", `{"task":"echo","group":"acme","subject":"` + strings.Repeat("s", fairway.MaxSubjectLength+1) + `"}`},
		{"unique_by", `{"task":"echo","group":"acme","unique_by":["colour"]}`},
	}
	for _, s := range submissions {
		if err := validate(schemas, "submission.json", []byte(s.body)); err == nil {
			t.Errorf("submission.json takes %s", s.body)
		}
		sub, err := fairway.DecodeSubmission([]byte(s.body), fairway.DefaultMaxArgsSize)
		if err == nil {
			err = sub.Normalize("", "", fairway.DefaultMaxArgsSize, 3)
		}
		var fe *fairway.Error
		if !errors.As(err, &fe) || fe.Field != s.field {
			t.Errorf("Go should refuse %s naming field %s; got %v", s.body, s.field, err)
		}
	}
	others := []struct{ file, body string }{
		{"event.json", `{"job_id":"1","task":"echo","group":"acme","state":"waiting","attempt":0,"time":"2026-11-25T08:00:00Z"}`},
		{"event.json", `{"id":"1","job_id":"1","task":"echo","group":"acme","state":"done","attempt":0,"time":"2026-11-25T08:00:00Z"}`},
		{"progress.json", `{"group":"acme","task":"echo","job_id":"1","attempt":1,"progress":101,"time":"2026-11-25T08:00:00Z"}`},
		{"api-job-request.json", `{"group":"acme"}`},
		{"api-job-request.json", `{"id":"1","colour":"red"}`},
		{"api-list-request.json", `{"limit":1001}`},
		{"api-list-request.json", `{"state":"lost"}`},
		{"api-bulk-request.json", `{"action":"delete","filter":{}}`},
		{"api-bulk-request.json", `{"action":"cancel","filter":{"colour":"red"}}`},
		{"api-prune-request.json", `{"state":"waiting","older_than":"720h"}`},
		{"api-reply.json", `{"error":{"code":"oops","message":"?"}}`},
		{"executor-register.json", `{"executor":{"app_id":"ocr","host":"h","slots":1,"tasks":["ocr"]}}`},
		{"executor-heartbeat.json", `{"executor":"ocr","instance":"i","jobs":[{"id":"1"}],"slots":1}`},
		{"executor-heartbeat.json", `{"executor":"ocr","instance":"i","jobs":[],"slots":1,"load":0.5}`},
		{"executor-report.json", `{"type":"done","group":"acme","job_id":"1","attempt":1,"executor":"ocr","instance":"i","time":"2026-11-25T08:00:00Z","outcome":"lost"}`},
		{"executor-results.json", `[{"group":"acme","job_id":"1","attempt":1,"executor":"ocr","instance":"i","time":"2026-11-25T08:00:00Z"}]`},
		{"event-message.json", `[]`},
		{"submit-message.json", `[]`},
		{"submit-message.json", `[{"id":"1","colour":"red"}]`},
		{"event-message.json", `[{"id":"1","job_id":"1","task":"echo","group":"acme","state":"done","attempt":0,"time":"2026-11-25T08:00:00Z"}]`},
		{"executor-cancel.json", `{"group":"acme","job_id":"1"}`},
		{"executor-cancel.json", `{"group":"acme","job_id":"1","attempt":"1"}`},
	}
	for _, o := range others {
		if err := validate(schemas, o.file, []byte(o.body)); err == nil {
			t.Errorf("%s takes %s", o.file, o.body)
		}
	}
}
