package jobs

import (
	"strings"
	"time"
)

// Workers report themselves to the store on every heartbeat
// (Store.ReportWorker), so that an operator can list them and ask one to
// drain: claim nothing more and let its running jobs finish
// (Store.DrainWorker).

// MaxWorkerName bounds the bytes of WorkerReport.Worker and Host.
const MaxWorkerName = 256

// WorkerReport is what a worker process says about itself on each beat.
type WorkerReport struct {
	Worker  string // its claim name (ClaimParams.Worker)
	Host    string
	PID     int
	Running int // jobs it runs now
}

// WorkerInfo is a worker as the store last heard from it.
type WorkerInfo struct {
	Worker    string    `json:"worker"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Running   int       `json:"running"`
	StartedAt time.Time `json:"started_at"` // first report
	SeenAt    time.Time `json:"seen_at"`    // last report
	Draining  bool      `json:"draining"`
}

// Normalize checks r: a worker name and a host of at most MaxWorkerName
// bytes without NUL (the worker's not blank), and a PID and Running not
// negative.
func (r WorkerReport) Normalize() (WorkerReport, error) {
	switch {
	case strings.TrimSpace(r.Worker) == "":
		return r, invalidField("worker", "required")
	case len(r.Worker) > MaxWorkerName:
		return r, invalidField("worker", "longer than %d bytes", MaxWorkerName)
	case len(r.Host) > MaxWorkerName:
		return r, invalidField("host", "longer than %d bytes", MaxWorkerName)
	case r.PID < 0:
		return r, invalidField("pid", "must not be negative")
	case r.Running < 0:
		return r, invalidField("running", "must not be negative")
	}
	if err := checkText("worker", r.Worker); err != nil {
		return r, err
	}
	return r, checkText("host", r.Host)
}
