// Package worker executes queued jobs through the engine: it claims
// batches from a jobs.Store, runs each job's prompt, heartbeats while it
// runs, and finalizes it according to one failure policy (Classify and
// Backoff). It also runs the reclaim loop for jobs whose worker died.
package worker
