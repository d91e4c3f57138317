//go:build unix

package proxy

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used: per
// request it does not depend on what else the machine runs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
