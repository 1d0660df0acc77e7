package testkit

import (
	"testing"
	"time"
)

// CPU measures the CPU time the process spends (user and system, every
// thread: the garbage collector's too) over a benchmark's loop, which
// the wall time per operation hides on a shared machine: a benchmark
// waiting for a core is not working.
type CPU struct{ start time.Duration }

// StartCPU starts measuring; call it just before the loop.
func StartCPU() CPU { return CPU{processCPU()} }

// Report adds the CPU time per operation to b's results as "cpu-ms/op";
// where the process's CPU time is not known it adds nothing.
func (c CPU) Report(b *testing.B) {
	end := processCPU()
	if end == 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(end-c.start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
