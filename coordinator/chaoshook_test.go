package coordinator

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestChaosHookOnlyInTheFaultBuild runs the ingest hook in a child process
// with the variable that arms it: a production build (no fairwaychaos tag,
// as go test builds by default) must go on as if it were not set; the
// fault suite's build (go test -tags fairwaychaos) must kill itself after
// the 2nd commit, as internal/chaos relies on.
func TestChaosHookOnlyInTheFaultBuild(t *testing.T) {
	if os.Getenv("FAIRWAY_TEST_CHAOS_HOOK_CHILD") == "1" {
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		for i := range 5 {
			chaosAfterIngestCommit(log, 10)
			t.Logf("survived commit %d", i+1)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChaosHookOnlyInTheFaultBuild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAIRWAY_TEST_CHAOS_HOOK_CHILD=1", chaosKillEnv+"=2")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the child hung:\n%s", out.String())
	}
	survived := bytes.Count(out.Bytes(), []byte("survived commit"))
	if chaosHooks {
		if err == nil || survived != 1 || !bytes.Contains(out.Bytes(), []byte("chaos: killed after an ingest commit")) {
			t.Fatalf("the fault build's hook did not kill the process after the 2nd commit (err %v, survived %d):\n%s", err, survived, out.String())
		}
		return
	}
	if err != nil || survived != 5 {
		t.Fatalf("the production build's hook acted on %s (err %v, survived %d of 5):\n%s", chaosKillEnv, err, survived, out.String())
	}
}
