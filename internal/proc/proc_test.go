package proc

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	for _, pid := range []int{0, -1} {
		if Alive(pid) {
			t.Fatalf("pid %d is alive", pid)
		}
	}
	// A child that has exited and been waited for is gone.
	name, args := "true", []string(nil)
	if runtime.GOOS == "windows" {
		name, args = "cmd", []string{"/c", "exit"}
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run %s: %v", name, err)
	}
	if pid := cmd.Process.Pid; Alive(pid) {
		t.Fatalf("pid %d of an exited child is alive", pid)
	}
}
