//go:build !unix

package peerbench

import "time"

var start = time.Now()

// cpuTime is wall time where the process's CPU time is not at hand.
func cpuTime() time.Duration { return time.Since(start) }
