//go:build fairwaychaos && unix

package coordinator

import (
	"os"
	ossignal "os/signal"
	"syscall"
)

// chaosStopSelf stops this process (SIGSTOP) and returns once it is
// resumed (SIGCONT): the stop reaches the process a moment after the
// call returns, so it waits for the SIGCONT itself.
func chaosStopSelf() {
	cont := make(chan os.Signal, 1)
	ossignal.Notify(cont, syscall.SIGCONT)
	defer ossignal.Stop(cont)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
}
