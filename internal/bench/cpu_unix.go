//go:build unix

package bench

import (
	"syscall"
	"time"
)

// selfCPU reads this process's CPU time (all its threads), with the
// microsecond resolution of getrusage rather than /proc's ticks. Its
// children (the coordinator, the NATS server) are figures of their own.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
