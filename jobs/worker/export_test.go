package worker

import (
	"context"
	"time"
)

// SetFinalizeBackoff replaces w's pause between tries of a failing
// finalizing write.
func SetFinalizeBackoff(w *Worker, f func(int) time.Duration) { w.backoff = f }

// ReclaimTick runs one turn of r's sweeping loop on the clock now.
func ReclaimTick(ctx context.Context, r *Reclaimer, now func() time.Time) {
	r.now = now
	r.tick(ctx)
}
