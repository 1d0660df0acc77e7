// Package worker runs the job service's background work: a Worker claims
// batches from a jobs.Store, runs each job's prompt through the engine,
// heart-beats it while it runs and settles it according to the jobs
// package's failure policy; a Reclaimer hands back the jobs of workers
// that died; an Archiver deletes old finished jobs. All three have the
// lifecycle every background loop of promptkit shares: New, NewReclaimer
// or NewArchiver checks a Config whose zero fields take the documented
// defaults; Start starts the loop in a goroutine of its own; Stop stops it
// and waits for it, for as long as its context allows. Stopping twice, or
// before Start, is safe; each starts once. A Worker's Stop is graceful:
// it stops claiming, lets running jobs finish for Config.ShutdownGrace
// and hands the rest back to the queue. RunOnce, for cron, runs one
// batch instead.
//
// # What a worker records and logs
//
// Every provider call the worker sees finish becomes an attempt event of
// the job (status, timings, usage; never prompt or answer text), the last
// one written with the job's result in one transaction, and
// every settled job attempt one Info log line, "job settled", with the
// job and prompt IDs, the outcome (succeeded, failed, retried,
// handed_back, discarded), the job's new state, its error kind, its
// attempt and how long it ran. A settling write that keeps failing is
// logged as an error instead. Neither holds the provider's own message:
// it can quote the prompt.
//
// When an operator needs to see why a provider refused (a 401's
// "Incorrect API key provided", a 429's quota message),
// Config.KeepProviderDetail keeps that message in the "detail" field of
// the attempt event of the call that ended the run (promptkit jobs show
// --verbose prints it; the events' data is also what the API's job view
// returns to the job's owner). The engine's execution events carry no
// provider text, so only the call whose error the run returned has one:
// calls the engine retried inside the run have none. The message is the
// engine's redacted one (the backend's key and anything shaped like a
// bearer token or an sk- key replaced), redacted again and cut to 500
// bytes on a character boundary like a stored error message. It never
// reaches the job's error message or the logs.
package worker
