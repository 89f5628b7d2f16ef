//go:build unix

package routing

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of the test process so far,
// including the garbage collector's workers.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
