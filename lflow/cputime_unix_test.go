//go:build unix

package lflow

import (
	"syscall"
	"time"
)

// processCPUTime returns the user+system CPU time this process has used.
// Benchmarks report throughput per CPU second as well as per wall second,
// because the development machine is shared and wall time there measures
// the neighbours as much as the code.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
