package devtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ProcessTimeout bounds how long a test waits for a process it runs to
// say something, or to stop: generous, since the machine is shared.
const ProcessTimeout = 2 * time.Minute

// Process is a program a test runs, its output collected in Out.
type Process struct {
	Cmd    *exec.Cmd
	Out    *Output
	exited chan error
}

// Start starts cmd, its standard output and error going to the Process's
// Out. When the test ends, the process is sent stop (a no-op once it
// exited) and killed if it has not exited within ProcessTimeout; its
// output is logged if the test failed.
func Start(t testing.TB, cmd *exec.Cmd, stop os.Signal) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, Out: &Output{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	if err := cmd.Start(); err != nil {
		t.Fatalf("devtest: starting %s: %v", cmd.Path, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(stop)
		select {
		case err := <-p.exited:
			p.exited <- err
		case <-time.After(ProcessTimeout):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("the output of %s:\n%s", filepath.Base(cmd.Path), p.Out)
		}
	})
	return p
}

// WaitFor waits until the output contains want, and fails t when the
// process exits first or ProcessTimeout passes.
func (p *Process) WaitFor(t testing.TB, want string) {
	t.Helper()
	select {
	case <-p.Out.Seen(want):
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("%s exited (%v) before it printed %q:\n%s", filepath.Base(p.Cmd.Path), err, want, p.Out)
	case <-time.After(ProcessTimeout):
		t.Fatalf("%s did not print %q within %s:\n%s", filepath.Base(p.Cmd.Path), want, ProcessTimeout, p.Out)
	}
}

// Wait waits for the process to exit and returns its exit status (-1 when
// it did not exit by itself: a signal, or a failure to wait).
func (p *Process) Wait(t testing.TB) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the next Wait
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("waiting for %s: %v", filepath.Base(p.Cmd.Path), err)
	case <-time.After(ProcessTimeout):
		t.Fatalf("%s did not exit within %s:\n%s", filepath.Base(p.Cmd.Path), ProcessTimeout, p.Out)
	}
	return -1
}

// Dev is a running `fairway dev`.
type Dev struct {
	Dir, NATSURL string
	PGPort       int
}

// StartDev runs `fairway dev` (the binary fairwayBin) in a fresh
// directory that PostgreSQL can reach, its NATS and PostgreSQL on free
// ports, its logs as JSON, with args added; waits until it says it runs,
// and stops it (SIGINT: it stops its PostgreSQL too) when the test ends.
func StartDev(t testing.TB, fairwayBin string, args ...string) *Dev {
	t.Helper()
	d := &Dev{Dir: Dir(t, "fairway-dev-")}
	natsPort := FreePort(t)
	d.PGPort = FreePort(t)
	d.NATSURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	cmd := exec.Command(fairwayBin, append([]string{"dev", "--dev-dir", d.Dir,
		"--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort), "--pg-port", fmt.Sprint(d.PGPort),
		"--log-format", "json"}, args...)...)
	Start(t, cmd, os.Interrupt).WaitFor(t, "Fairway is running")
	return d
}
