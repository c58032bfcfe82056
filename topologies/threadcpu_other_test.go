//go:build !linux

package topologies

import "time"

// threadCPU is only implemented on Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
