// Package worker runs the job service's background work: a Worker claims
// batches from a jobs.Store, runs each job's prompt through the engine,
// heart-beats it while it runs and settles it according to the jobs
// package's failure policy; a Reclaimer hands back the jobs of workers
// that died; an Archiver deletes old finished jobs. All three are made
// with New from a Config whose zero fields take the documented defaults,
// and run until their context ends.
package worker
