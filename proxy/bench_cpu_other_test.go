//go:build !unix

package proxy

import "time"

// processCPU is not measured here: the benchmark reports 0 CPU.
func processCPU() time.Duration { return 0 }
