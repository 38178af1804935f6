package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/spf13/cobra"
)

func newSubmitCmd(e *env) *cobra.Command {
	var sub fairway.Submission
	var args, priority, runAt, triggerAfter, expiresAt string
	var maxRetries int
	var async, wait bool
	cmd := &cobra.Command{
		Use:   "submit TASK --group GROUP [--args JSON]",
		Short: "Submit a job",
		Long: `Submit a job of TASK for GROUP and print its id. By default the coordinators
answer at once (request/reply): with the stored job's id, or with their
refusal naming the field (exit 1), e.g. for a task that no executor has
registered:

  rejected: unknown task "x": no executor has registered it (known tasks: …)

(Until an executor has registered at all, every task is accepted: the job
waits for one, with a warning.)

With --async the job is published to JetStream (fairway.submit.<group>.<task>)
and its id printed at once: it is stored even while no coordinator runs, but
nothing is checked first. A problem the coordinators find when they store
it, an unknown task included, is then only a "rejected" event:
'fairway events tail --state rejected' shows it.

With --wait it then waits until the job ends: it prints the job's result
after its id and exits 0 when it succeeded, 3 when it failed and 4 when it
was cancelled (its error on stderr); with --async a rejection found when it
is stored is the error (exit 1).`,
		Example: `  fairway submit echo --group acme --args '{"hello":"world"}'
  fairway submit sleep --group acme --args '{"seconds":10}' --priority high
  fairway submit fail --group acme --args '{"times":2}' --max-retries 3
  fairway submit echo --group acme --args '{"n":1}' --wait
  fairway submit ocr --group acme --args @page-17.json     # the arguments from a file
  produce-args | fairway submit ocr --group acme --args -  # from stdin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if err := e.groupOrTenant(cmd, "the group (tenant) the job belongs to (see 'fairway submit --help')"); err != nil {
				return err
			}
			sub.Task = pos[0]
			sub.Priority = fairway.Priority(priority)
			var err error
			if sub.Args, err = jsonArgs(cmd, "args", args); err != nil {
				return err
			}
			if cmd.Flags().Changed("max-retries") {
				sub.MaxRetries = &maxRetries
			}
			for _, tf := range []struct {
				flag, value string
				dst         **time.Time
			}{{"run-at", runAt, &sub.RunAt}, {"trigger-after", triggerAfter, &sub.TriggerAfter}, {"expires-at", expiresAt, &sub.ExpiresAt}} {
				if tf.value == "" {
					continue
				}
				t, err := parseTimeOrDelay(tf.value)
				if err != nil {
					return usageError{fmt.Errorf("--%s: %w", tf.flag, err)}
				}
				*tf.dst = &t
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			var id string
			if async {
				if id, err = c.Submit(cmd.Context(), sub); err != nil {
					return describe(err)
				}
			} else {
				reply, err := c.SubmitReply(cmd.Context(), sub)
				if err != nil {
					return rejected(err)
				}
				if reply.Warning != "" {
					fmt.Fprintln(e.stderr, "fairway: warning:", reply.Warning)
				}
				id = reply.Job.ID
			}
			fmt.Fprintln(e.stdout, id)
			if !wait {
				return nil
			}
			return e.waitFor(cmd.Context(), c, sub.Group, id)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sub.Group, "group", "", "the group (tenant) the job belongs to (required)")
	f.StringVar(&args, "args", "", "the task's arguments: a JSON object, @FILE to read it from a file, - from stdin")
	f.StringVar(&priority, "priority", "", "high or low (default low)")
	f.StringVar(&sub.ID, "id", "", "job id, for an idempotent submit (default: a new UUIDv7)")
	f.StringVar(&sub.Tracker, "tracker", "", "refuse the job while a non-final job with this tracker exists")
	f.StringVar(&sub.Subject, "subject", "", "a human description of the job")
	f.StringVar(&sub.Submitter, "submitter", "", "who submits the job")
	f.IntVar(&maxRetries, "max-retries", 0, "retries after a failure (default: the coordinator's scheduler.retries)")
	f.StringVar(&runAt, "run-at", "", "not before this time: RFC 3339, or a delay such as 10m")
	f.BoolVar(&sub.Pending, "pending", false, "hold the job until 'fairway jobs release ID --group GROUP' (or --trigger-after)")
	f.StringVar(&triggerAfter, "trigger-after", "", "hold the job until this time: RFC 3339, or a delay such as 1h (implies --pending)")
	f.StringSliceVar(&sub.UniqueBy, "unique-by", nil, "refuse the job while a non-final job of the group has the same values of these fields: task, args, subject (comma-separated)")
	f.StringVar(&sub.UniqueFor, "unique-for", "", "with --unique-by: the values count within windows of this length (1h, 24h)")
	f.StringSliceVar(&sub.DependsOn, "depends-on", nil, "run only after these jobs of the group (ids, comma-separated) have succeeded; cancelled if one fails")
	f.StringVar(&sub.Timeout, "timeout", "", "fail an attempt that runs longer than this (30s, 15m, 2h; at least 1s), retried as usual (default: the executor's for the task, if any)")
	f.StringVar(&expiresAt, "expires-at", "", "fail the job as expired if it has not started by this time: RFC 3339, or a delay such as 30m")
	f.BoolVar(&async, "async", false, "publish to JetStream instead of waiting for the coordinator's answer")
	f.BoolVar(&wait, "wait", false, "wait until the job ends, print its result and exit with its outcome (0 succeeded, 3 failed, 4 cancelled)")
	return e.withConfig(cmd, clientKeys...)
}

// waitFor waits until the job id of group ends (Client.Wait) and prints
// its result (stdout); a job that failed or was cancelled is a jobEndError.
func (e *env) waitFor(ctx context.Context, c *events.Client, group, id string) error {
	job, err := c.Wait(ctx, group, id)
	switch {
	case err != nil && job != nil:
		return fmt.Errorf("waiting for job %s (last seen %s): %w", id, job.State, describe(err))
	case err != nil:
		return fmt.Errorf("waiting for job %s: %w", id, rejected(err))
	case job.State != fairway.StateSuccess:
		return jobEndError{job: job}
	}
	if len(job.Result) > 0 {
		fmt.Fprintln(e.stdout, string(job.Result))
	}
	return nil
}

// rejected renders the coordinators' refusal of a submission as its
// rejected event would say it: "rejected: unknown task …", "rejected:
// priority: …". Other errors (no answer, say) are described as usual.
func rejected(err error) error {
	var fe *fairway.Error
	if !errors.As(err, &fe) || fe.Code != fairway.CodeInvalid && fe.Code != fairway.CodeDuplicate && fe.Code != fairway.CodeQuota {
		return describe(err)
	}
	if fe.Field == "task" && strings.HasPrefix(fe.Message, "unknown task") {
		return fmt.Errorf("rejected: %s", fe.Message) // it names the task already
	}
	return fmt.Errorf("rejected: %w", err)
}

func parseTimeOrDelay(s string) (time.Time, error) {
	if d, err := parseDays(s); err == nil {
		return time.Now().Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a delay such as 10m, 36h or 7d", s)
	}
	return t, nil
}

func newJobsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "List, show, cancel, release, re-prioritise, retry and prune jobs; read their logs"}
	var group string
	var list events.ListRequest
	var state string
	var asJSON bool
	var limit int
	listCmd := e.withConfig(&cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.groupOrTenant(cmd, ""); err != nil {
				return err
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			list.Group, list.State = group, fairway.State(state)
			// Follow next_cursor until --limit jobs (0: all), a page of at
			// most 1000 at a time.
			var jobs []fairway.Job
			req := list
			for {
				req.Limit = 1000
				if limit > 0 {
					req.Limit = min(1000, limit-len(jobs))
				}
				page, next, err := c.ListPage(cmd.Context(), req)
				if err != nil {
					return describe(err)
				}
				jobs = append(jobs, page...)
				if next == "" {
					break
				}
				if limit > 0 && len(jobs) >= limit {
					fmt.Fprintf(e.stderr, "more jobs: --cursor %s\n", next)
					break
				}
				req.Cursor = next
			}
			if asJSON {
				return writeJSON(e.stdout, jobs)
			}
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tGROUP\tTASK\tSTATE\tPRIO\tATTEMPT\tPROGRESS\tSUBMITTED\tDUE\tERROR")
			now := time.Now()
			for _, j := range jobs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d%%\t%s\t%s\t%s\n", j.ID, j.Group, j.Task, j.State, j.Priority,
					j.Attempt, j.MaxRetries+1, j.Progress, j.Submitted.Local().Format(time.DateTime), due(j, now), firstLine(j.Error))
			}
			return w.Flush()
		},
	}, clientKeys...)
	listCmd.Flags().StringVar(&group, "group", "", "only this group")
	listCmd.Flags().StringVar(&list.Task, "task", "", "only this task")
	listCmd.Flags().StringVar(&state, "state", "", "only this state")
	listCmd.Flags().IntVar(&limit, "limit", 50, "at most this many (0: all), fetched in pages of at most 1000")
	listCmd.Flags().StringVar(&list.Cursor, "cursor", "", "start after the job a previous listing ended with (the cursor it printed)")
	listCmd.Flags().BoolVar(&list.Full, "full", false, "include args and result (with --json)")
	listCmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	jobCmd := func(use, short string, run func(cmd *cobra.Command, c *events.Client, id string) error) *cobra.Command {
		sub := e.withConfig(&cobra.Command{
			Use: use + " ID --group GROUP", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := e.groupOrTenant(cmd, "job ids are unique per group only"); err != nil {
					return err
				}
				c, closeConn, err := e.client()
				if err != nil {
					return err
				}
				defer closeConn()
				return describe(run(cmd, c, args[0]))
			},
		}, clientKeys...)
		sub.Flags().StringVar(&group, "group", "", "the job's group (required; the request goes to the group's API, fairway.api.<group>.<verb>)")
		return sub
	}
	show := jobCmd("show", "Show a job", func(cmd *cobra.Command, c *events.Client, id string) error {
		job, err := c.Get(cmd.Context(), group, id)
		if err != nil {
			return err
		}
		return writeJSON(e.stdout, job)
	})
	var logsLimit int
	var logsCursor string
	logs := jobCmd("logs", "Print a job's log", func(cmd *cobra.Command, c *events.Client, id string) error {
		// Page by page, printed as they come, until --limit lines (0: all).
		req, printed := events.LogsRequest{ID: id, Cursor: logsCursor}, 0
		for {
			if logsLimit > 0 {
				req.Limit = min(1000, logsLimit-printed)
			}
			lines, next, err := c.LogsPage(cmd.Context(), group, req)
			if err != nil {
				return err
			}
			for _, l := range lines {
				fmt.Fprintf(e.stdout, "%s #%d %-5s %s\n", l.Time.Local().Format("15:04:05.000"), l.Attempt, strings.ToUpper(l.Level), l.Message)
			}
			printed += len(lines)
			if next == "" {
				return nil
			}
			if logsLimit > 0 && printed >= logsLimit {
				fmt.Fprintf(e.stderr, "more lines: --cursor %s\n", next)
				return nil
			}
			req.Cursor = next
		}
	})
	logs.Flags().IntVar(&logsLimit, "limit", 0, "at most this many lines (0: all)")
	logs.Flags().StringVar(&logsCursor, "cursor", "", "start after the line a previous call ended with (the cursor it printed)")
	cancel := jobCmd("cancel", "Cancel a job (a running one is stopped)", func(cmd *cobra.Command, c *events.Client, id string) error {
		job, err := c.Cancel(cmd.Context(), group, id)
		if err != nil {
			return err
		}
		if job.State == fairway.StateCancelled {
			fmt.Fprintf(e.stdout, "job %s cancelled\n", id)
		} else {
			fmt.Fprintf(e.stdout, "job %s is %s on executor %s: asked it to stop; it ends cancelled when the task returns\n", id, job.State, job.Executor)
		}
		return nil
	})
	release := jobCmd("release", "Release a pending job: it runs as soon as it is its turn", func(cmd *cobra.Command, c *events.Client, id string) error {
		if _, err := c.Release(cmd.Context(), group, id); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "job %s released: waiting\n", id)
		return nil
	})
	var newPriority string
	priority := jobCmd("priority", "Change the priority of a job that has not started (pending, waiting or stuck)", func(cmd *cobra.Command, c *events.Client, id string) error {
		if newPriority == "" {
			return usageError{errors.New("--set is required: high or low")}
		}
		job, err := c.SetPriority(cmd.Context(), group, id, fairway.Priority(newPriority))
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "job %s: priority %s\n", id, job.Priority)
		return nil
	})
	priority.Flags().StringVar(&newPriority, "set", "", "the new priority: high or low")
	retry := jobCmd("retry", "Run a failed or cancelled job again, as a new attempt with its retries reset (its dependents wait for it again)", func(cmd *cobra.Command, c *events.Client, id string) error {
		job, err := c.Retry(cmd.Context(), group, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "job %s retried: %s\n", id, job.State)
		return nil
	})
	cmd.AddCommand(listCmd, show, logs, cancel, release, priority, retry, graphCmd(e, jobCmd), newPruneCmd(e))
	return cmd
}

// newPruneCmd is `jobs prune`: a one-off removal of finished jobs, batch
// by batch, with progress.
func newPruneCmd(e *env) *cobra.Command {
	var olderThan time.Duration
	olderThanFlag := newDaysValue(&olderThan)
	var states []string
	var group string
	var batch int
	cmd := e.withConfig(&cobra.Command{
		Use:   "prune --older-than DURATION [--state success,failed,cancelled] [--group GROUP]",
		Short: "Remove finished jobs, and their logs, that ended before a time (operators)",
		Long: `Remove finished jobs (success, failed, cancelled), with their logs, that
ended more than --older-than ago, in batches of --batch jobs, each a short
transaction: it can run while Fairway works. Coordinators also prune on
their own by age (coordinator.retention.*); this is for a one-off, e.g.
before lowering those. A pruned job's id may be used again.

--older-than takes days, hours and minutes: 7d, 1d12h, 36h, 30m; 0s prunes
every finished job of the states given.

Example: fairway jobs prune --older-than 7d --state failed,cancelled`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case !cmd.Flags().Changed("older-than"):
				return usageError{errors.New("--older-than is required: a duration such as 30d, 1d12h or 30m (0s: every finished job)")}
			case olderThan < 0:
				return usageError{fmt.Errorf("--older-than %s: must not be negative", olderThanFlag)}
			}
			for _, state := range states {
				if !fairway.State(state).Final() {
					// Checked before any is pruned: a typo must not leave
					// the states before it pruned and the rest not.
					return usageError{fmt.Errorf("--state %q: not a final state (success, failed, cancelled)", state)}
				}
			}
			if batch < 1 || batch > 10000 {
				return usageError{fmt.Errorf("--batch %d: must be in 1..10000", batch)}
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			for _, state := range states {
				req := events.PruneRequest{State: fairway.State(state), OlderThan: olderThan.String(), Group: group, Limit: batch}
				total, last := 0, time.Now()
				for {
					n, err := c.Prune(cmd.Context(), req)
					if err != nil {
						return describe(err)
					}
					total += n
					if n < batch {
						break
					}
					if time.Since(last) > time.Second {
						fmt.Fprintf(e.stderr, "%s: %d jobs pruned so far…\n", state, total)
						last = time.Now()
					}
				}
				fmt.Fprintf(e.stdout, "%s: pruned %d jobs that ended more than %s ago\n", state, total, olderThanFlag)
			}
			return nil
		},
	}, clientKeys...)
	cmd.Flags().Var(olderThanFlag, "older-than", "remove jobs that ended more than this long ago (required; e.g. 7d, 1d12h, 36h)")
	cmd.Flags().StringSliceVar(&states, "state", []string{"success", "failed", "cancelled"}, "final states to prune")
	cmd.Flags().StringVar(&group, "group", "", "only this group (default: all)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "jobs removed per transaction (1..10000)")
	return cmd
}

// tailProgress prints the progress the coordinators publish until ctx ends.
func (e *env) tailProgress(ctx context.Context, c *events.Client, f events.Filter, asJSON bool) error {
	out := make(chan fairway.Progress, 256)
	sub, err := c.SubscribeProgress(f.Group, f.Task, func(p fairway.Progress) {
		select {
		case out <- p:
		default: // a slow terminal misses some
		}
	})
	if err != nil {
		return describe(err)
	}
	defer sub.Stop()
	fmt.Fprintf(e.stderr, "following progress on %s (Ctrl-C to stop)\n", c.Subjects().ProgressFilter(f.Group, f.Task))
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-out:
			if asJSON {
				data, _ := json.Marshal(p)
				fmt.Fprintln(e.stdout, string(data))
				continue
			}
			eta := ""
			if p.EstimatedEnd != nil {
				eta = fmt.Sprintf("  ends about %s (in %s)", p.EstimatedEnd.Local().Format(time.TimeOnly), time.Until(*p.EstimatedEnd).Round(time.Second))
			}
			fmt.Fprintf(e.stdout, "%s  %s/%s  %s  attempt %d  %3d%%%s\n", p.Time.Local().Format(time.TimeOnly), p.Group, p.Task, p.JobID, p.Attempt, p.Progress, eta)
		}
	}
}

func newEventsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Follow lifecycle events"}
	var f events.Filter
	var state, since string
	var asJSON, progress bool
	tail := e.withConfig(&cobra.Command{
		Use:   "tail",
		Short: "Print lifecycle events as they happen",
		Long: `Print every committed state change (and every rejected submission) as it
happens, from the JetStream stream of events. Filters narrow the subject
fairway.events.<group>.<task>.<state>. --since replays stored events first.`,
		Example: `  fairway events tail
  fairway events tail --group acme --state failed
  fairway events tail --since 1h --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.State = fairway.State(state)
			switch since {
			case "":
			case "all":
				f.Since = time.Unix(0, 0)
			default:
				t, err := parseTimeOrDelay("-" + strings.TrimPrefix(since, "-"))
				if err != nil {
					if t, err = time.Parse(time.RFC3339, since); err != nil {
						return usageError{fmt.Errorf("--since %q: use a duration such as 1h or 7d, an RFC 3339 time, or all", since)}
					}
				}
				f.Since = t
			}
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			if progress {
				return e.tailProgress(cmd.Context(), c, f, asJSON)
			}
			out := make(chan events.Event, 256)
			sub, err := c.Subscribe(cmd.Context(), f, func(ev events.Event) { out <- ev })
			if err != nil {
				return describe(err)
			}
			defer sub.Stop()
			fmt.Fprintf(e.stderr, "following events on %s (Ctrl-C to stop)\n", c.Subjects().EventFilter(f.Group, f.Task, f.State))
			for {
				select {
				case <-cmd.Context().Done():
					return nil
				case ev := <-out:
					if asJSON {
						data, _ := json.Marshal(ev)
						fmt.Fprintln(e.stdout, string(data))
						continue
					}
					fmt.Fprintln(e.stdout, formatEvent(ev))
				}
			}
		},
	}, clientKeys...)
	tail.Flags().StringVar(&f.Group, "group", "", "only this group")
	tail.Flags().StringVar(&f.Task, "task", "", "only this task")
	tail.Flags().StringVar(&state, "state", "", "only this state (or rejected)")
	tail.Flags().StringVar(&since, "since", "", "replay stored events from this long ago (1h, 7d), this time (RFC 3339), or all")
	tail.Flags().BoolVar(&asJSON, "json", false, "print each event's JSON body")
	tail.Flags().BoolVar(&progress, "progress", false, "print running jobs' progress and estimated end instead (at most once a second per job; --since and --state do not apply)")
	cmd.AddCommand(tail)
	return cmd
}

func formatEvent(ev events.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-9s %s/%s %s", ev.Time.Local().Format("15:04:05.000"), ev.State, ev.Group, ev.Task, ev.JobID)
	if ev.Attempt > 0 {
		fmt.Fprintf(&b, " attempt=%d", ev.Attempt)
	}
	if ev.Executor != "" {
		fmt.Fprintf(&b, " executor=%s", ev.Executor)
	}
	if ev.Field != "" {
		fmt.Fprintf(&b, " field=%s", ev.Field)
	}
	if ev.Error != "" {
		fmt.Fprintf(&b, " error=%q", firstLine(ev.Error))
	}
	return b.String()
}

func newExecutorsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "executors", Short: "Show the executors"}
	list := e.withConfig(&cobra.Command{
		Use: "list", Short: "List executors: app-id, host, state (live, gone, deregistered), slots in use, last heartbeat", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, closeConn, err := e.client()
			if err != nil {
				return err
			}
			defer closeConn()
			execs, err := c.Executors(cmd.Context())
			if err != nil {
				return describe(err)
			}
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "APP-ID\tHOST\tSTATE\tSLOTS\tRUNNING\tTASKS\tSTARTED\tLAST HEARTBEAT")
			for _, x := range execs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s ago\n", x.AppID, x.Host, executorState(x), x.Slots, x.Running, strings.Join(x.Tasks, ","),
					x.Started.Local().Format(time.DateTime), time.Since(x.LastHeartbeat).Round(time.Second))
			}
			return w.Flush()
		},
	}, clientKeys...)
	cmd.AddCommand(list)
	for _, resume := range []bool{false, true} {
		var task string
		verb, short := "pause", "Stop an executor taking jobs (of one task with --task); its running jobs finish"
		if resume {
			verb, short = "resume", "Let a paused executor take jobs again (of one task with --task)"
		}
		c := e.withConfig(&cobra.Command{
			Use: verb + " APP-ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, closeConn, err := e.client()
				if err != nil {
					return err
				}
				defer closeConn()
				if err := c.Pause(cmd.Context(), events.PauseCommand{Executor: args[0], Task: task, Resume: resume}); err != nil {
					return describe(err)
				}
				what := "every task"
				if task != "" {
					what = "task " + task
				}
				fmt.Fprintf(e.stdout, "executor %s told to %s %s\n", args[0], verb, what)
				return nil
			},
		}, clientKeys...)
		c.Flags().StringVar(&task, "task", "", "only this task (default: every task)")
		cmd.AddCommand(c)
	}
	return cmd
}

// executorState is an executor's state for executors list: live, or gone
// or deregistered with how long ago.
func executorState(x fairway.Executor) string {
	if x.State == fairway.ExecutorLive || x.State == "" || x.Left == nil {
		return cmp.Or(string(x.State), string(fairway.ExecutorLive))
	}
	return fmt.Sprintf("%s %s ago", x.State, time.Since(*x.Left).Round(time.Second))
}

func newConfigCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show the configuration"}
	print := e.withConfig(&cobra.Command{
		Use:   "print",
		Short: "Print the effective configuration (secrets masked) and where each value comes from",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return e.cfg.Print(e.stdout) },
	})
	cmd.AddCommand(print)
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// due says when a job that waits for a time runs: a delayed job (run_at),
// a retry's delay (stuck), a pending job's trigger; "on release" for a
// pending job only a release starts; "-" for one that is due, or past it.
func due(j fairway.Job, now time.Time) string {
	switch {
	case j.State == fairway.StatePending && j.TriggerAfter != nil:
		return "trigger " + j.TriggerAfter.Local().Format(time.DateTime)
	case j.State == fairway.StatePending && len(j.DependsOn) == 0:
		return "on release"
	case j.State == fairway.StatePending:
		return "after its dependencies"
	case (j.State == fairway.StateWaiting || j.State == fairway.StateStuck) && j.RunAt.After(now):
		return j.RunAt.Local().Format(time.DateTime) + " (in " + j.RunAt.Sub(now).Round(time.Second).String() + ")"
	}
	return "-"
}
