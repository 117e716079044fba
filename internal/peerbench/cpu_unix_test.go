//go:build unix

package peerbench

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time, user and system, every thread's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
