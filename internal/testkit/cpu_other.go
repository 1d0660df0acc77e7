//go:build !unix

package testkit

import "time"

// processCPU is not known here: CPU.Report adds nothing.
func processCPU() time.Duration { return 0 }
