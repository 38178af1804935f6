package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
)

const (
	// replyHeadroom is kept free below max_payload in every reply.
	replyHeadroom = 1 << 10
	// replyEnvelope bounds what a list or logs reply holds besides its
	// items: braces, field names, next_cursor.
	replyEnvelope = 256
	// maxReplyFallback is the cap when the connection knows no max_payload
	// (NATS's default).
	maxReplyFallback = 1 << 20
	// errorTextMax caps a job's error text in a reply whose job had to be
	// cut to fit.
	errorTextMax = 64 << 10
)

// maxReply is the largest reply the NATS server takes, less headroom.
func (c *Coordinator) maxReply() int {
	limit := int(c.nc.MaxPayload())
	if limit <= 0 {
		limit = maxReplyFallback
	}
	return limit - replyHeadroom
}

// encodedSize is the size of v in JSON.
func encodedSize(v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		return 0 // respond reports the error
	}
	return len(data)
}

// cutJob leaves out what makes a job too large for a reply: its args and
// result, and all but errorTextMax bytes of its error.
func cutJob(j *fairway.Job) {
	j.Args, j.Result = nil, nil
	if len(j.Error) > errorTextMax {
		j.Error = store.TruncateText(j.Error, errorTextMax) + fmt.Sprintf(" … [truncated: %d bytes]", len(j.Error))
	}
}

// fitJob cuts the job of a reply (get, cancel, submit, …) that would not
// fit in maxReply bytes, and names it in Truncated: its state is still
// worth an answer.
func fitJob(reply *events.Reply, maxReply int) {
	if encodedSize(reply) <= maxReply {
		return
	}
	job := *reply.Job
	cutJob(&job)
	reply.Job = &job
	reply.Truncated = append(reply.Truncated, job.ID)
}

// listParams is the listing a list request asks for: on the tenant API
// always of the subject's group (a body naming another is refused).
func listParams(r request, req events.ListRequest) (store.ListParams, error) {
	if !r.admin {
		if req.Group != "" && req.Group != r.group {
			return store.ListParams{}, fairway.Invalid("group", "body names group %q but the subject names %q", req.Group, r.group)
		}
		req.Group = r.group
	}
	p := store.ListParams{Group: req.Group, Task: req.Task, State: req.State, Priority: req.Priority,
		Text: req.Text, Limit: req.Limit, Cursor: req.Cursor, Full: req.Full}
	switch {
	case req.State != "" && !req.State.Valid():
		return p, fairway.Invalid("state", "unknown state %q", req.State)
	case req.Priority != "" && req.Priority != fairway.PriorityHigh && req.Priority != fairway.PriorityLow:
		return p, fairway.Invalid("priority", "unknown priority %q: use \"high\" or \"low\"", req.Priority)
	case len(req.Text) > 256:
		return p, fairway.Invalid("text", "%d bytes; at most 256", len(req.Text))
	}
	for field, name := range map[string]string{"task": req.Task, "group": req.Group} {
		if name != "" {
			if err := fairway.CheckName(field, name); err != nil {
				return p, err
			}
		}
	}
	if len(req.Cursor) > 1024 {
		return p, fairway.Invalid("cursor", "%d bytes: not a cursor this API gave (they are short); start again without it", len(req.Cursor))
	}
	if req.Since != nil {
		p.Since = *req.Since
	}
	if req.Until != nil {
		p.Until = *req.Until
	}
	return p, nil
}

func (c *Coordinator) apiList(ctx context.Context, r request) (events.Reply, error) {
	var req events.ListRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	if req.Limit < 0 || req.Limit > store.ListLimitMax {
		return events.Reply{}, fairway.Invalid("limit", "%d is not in 0..%d", req.Limit, store.ListLimitMax)
	}
	params, err := listParams(r, req)
	if err != nil {
		return events.Reply{}, err
	}
	params.MaxBytes = r.maxReply - replyEnvelope
	// Jobs are added while the reply stays under its cap; the first one
	// always is, cut if it alone is too large, so every page moves on.
	// Each job is encoded once, into the reply.
	budget := params.MaxBytes
	buf := bytes.NewBufferString(`{"jobs":[`)
	var truncated []string
	n := 0
	next, err := c.journalList(ctx, params, func(j fairway.Job) bool {
		data, err := json.Marshal(j)
		if err != nil {
			return false
		}
		if buf.Len()+len(data)+1 > budget {
			if n > 0 {
				return false
			}
			cutJob(&j)
			truncated = append(truncated, j.ID)
			if data, err = json.Marshal(j); err != nil {
				return false
			}
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(data)
		n++
		return true
	})
	if err != nil {
		return events.Reply{}, err
	}
	buf.WriteByte(']')
	if next != "" {
		fmt.Fprintf(buf, `,"next_cursor":%q`, next) // digits, or the journal's (journallist.go)
	}
	if len(truncated) > 0 {
		ids, _ := json.Marshal(truncated)
		buf.WriteString(`,"truncated":`)
		buf.Write(ids)
	}
	buf.WriteByte('}')
	*r.encoded = buf.Bytes()
	return events.Reply{}, nil
}

func (c *Coordinator) apiLogs(ctx context.Context, r request) (events.Reply, error) {
	var req events.LogsRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	if req.ID == "" {
		return events.Reply{}, fairway.Invalid("id", "missing: name the job")
	}
	group, err := jobGroup(r.group, req.Group, r.admin)
	if err != nil {
		return events.Reply{}, err
	}
	if req.Limit < 0 || req.Limit > store.LogsLimitMax {
		return events.Reply{}, fairway.Invalid("limit", "%d is not in 0..%d", req.Limit, store.LogsLimitMax)
	}
	live, err := c.journalLogsLive(ctx, fairway.JobRef{Group: group, ID: req.ID})
	if err != nil {
		return events.Reply{}, err
	}
	var reply events.Reply
	budget, size := r.maxReply-replyEnvelope, 0
	next, err := c.parts.of(group).store.LogLines(ctx, store.LogsParams{Group: group, ID: req.ID, Cursor: req.Cursor, Limit: req.Limit,
		MessageMax: min(store.LogMessageMaxDefault, budget/2), Live: live}, func(l fairway.LogLine) bool {
		n := encodedSize(l) + 1
		if size+n > budget && len(reply.Logs) > 0 {
			return false
		}
		reply.Logs = append(reply.Logs, l)
		size += n
		return true
	})
	if err != nil {
		return events.Reply{}, err
	}
	reply.NextCursor = next
	return reply, nil
}
