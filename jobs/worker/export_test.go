package worker

import "time"

// SetFinalizeBackoff replaces w's pause between tries of a failing
// finalizing write.
func SetFinalizeBackoff(w *Worker, f func(int) time.Duration) { w.backoff = f }
