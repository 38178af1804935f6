package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// An executor in another language runs in a process of its own: the
// conformance program of its package (clients/conformance/README.md),
// which registers the task conf-sleep, whose job sleeps args.ms. The
// scenarios that support one (drain, short-jobs) submit conf-sleep jobs
// instead of the Go executor's "work", and read the handlers' times from
// the jobs' records (started, finished: the handler's own, as its
// executor reported them) rather than from the handler.

// externalTask is the task the external executors run.
const externalTask = "conf-sleep"

// external tells whether the scenario's executor is another language's
// process.
func (o Options) external() bool { return len(o.ExecutorCommand) > 0 }

// jobs are n submissions for the system's executor: tasks "work" for the
// Go executor, conf-sleep of ms milliseconds for an external one.
func (s *system) jobs(n int, group func(i int) string, ms int) []fairway.Submission {
	subs := submissions(n, group)
	if s.opts.external() {
		args := json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms))
		for i := range subs {
			subs[i].Task, subs[i].Args = externalTask, args
		}
	}
	return subs
}

// startExecutorProcess runs the external executor with cfg.slots slots,
// and waits until it has registered (it prints a line saying so).
func (s *system) startExecutorProcess(ctx context.Context, cfg systemConfig) error {
	c := s.opts.ExecutorCommand
	args := append(slices.Clone(c[1:]), "--nats-url", s.natsURL, "--app-id", "bench-0",
		"--slots", fmt.Sprint(cfg.slots), "--tasks", externalTask)
	cmd := exec.Command(c[0], args...) //nolint:gosec // G204: the caller's own command (fairway bench --executor)
	cmd.Env = append(os.Environ(), s.opts.ExecutorEnv...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the executor (%s): %w", strings.Join(c, " "), err)
	}
	exited := make(chan error, 1)
	registered := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			line := sc.Text()
			if !said && strings.HasPrefix(line, "conformance: registered ") {
				said = true
				close(registered)
			}
			s.opts.Logger.Debug("bench: executor", "line", line)
		}
		exited <- cmd.Wait()
	}()
	s.execPid = cmd.Process.Pid
	s.cleanup = append(s.cleanup, func() {
		s.stopProcess("the executor", cmd, exited, func() error { return cmd.Process.Signal(syscall.SIGTERM) })
	})
	select {
	case <-registered:
		return nil
	case err := <-exited:
		exited <- err
		return fmt.Errorf("the executor (%s) exited before it registered: %v", strings.Join(c, " "), err)
	case <-time.After(time.Minute):
		return fmt.Errorf("the executor (%s) did not register within a minute", strings.Join(c, " "))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handlerTimes reads the handlers' times of the jobs of groups from their
// records: the first start, the last end and the sum of the runs.
func (s *system) handlerTimes(ctx context.Context, groups []string) (first, last time.Time, ran time.Duration, n int, err error) {
	for _, g := range groups {
		cursor := ""
		for {
			jobs, next, err := s.client.ListPage(ctx, events.ListRequest{Group: g, State: fairway.StateSuccess, Limit: 1000, Cursor: cursor})
			if err != nil {
				return first, last, ran, n, fmt.Errorf("reading the jobs of group %s: %w", g, err)
			}
			for _, j := range jobs {
				if j.Started == nil || j.Finished == nil {
					return first, last, ran, n, errors.New("a job's record has no start or end: " + j.ID)
				}
				if first.IsZero() || j.Started.Before(first) {
					first = *j.Started
				}
				if j.Finished.After(last) {
					last = *j.Finished
				}
				ran += j.Finished.Sub(*j.Started)
				n++
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return first, last, ran, n, nil
}
