package sqlitestore

import (
	"context"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// Workers (migration 15): one row per worker process, as it last reported
// itself (jobs.Store.ReportWorker).

const workerCols = `worker, host, pid, running, started_at, seen_at, draining`

var (
	qWorkerUpsert = wq(`INSERT INTO workers (worker, host, pid, running, started_at, seen_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
		ON CONFLICT (worker) DO UPDATE SET host = excluded.host, pid = excluded.pid, running = excluded.running,
			seen_at = excluded.seen_at
		RETURNING draining`)
	qWorkerDrain = wq(`UPDATE workers SET draining = ?2 WHERE worker = ?1 RETURNING ` + workerCols)
)

const qWorkerList = `SELECT ` + workerCols + ` FROM workers WHERE seen_at >= ?1 ORDER BY worker`

func scanWorker(r scanner) (jobs.WorkerInfo, error) {
	var (
		w                 jobs.WorkerInfo
		startedAt, seenAt int64
	)
	if err := r.Scan(&w.Worker, &w.Host, &w.PID, &w.Running, &startedAt, &seenAt, &w.Draining); err != nil {
		return w, err
	}
	w.StartedAt, w.SeenAt = fromMicros(startedAt), fromMicros(seenAt)
	return w, nil
}

// WorkerUpsert writes in a transaction of its own.
func (d *opsDB) WorkerUpsert(ctx context.Context, r jobs.WorkerReport) (bool, error) {
	var draining bool
	err := d.store().tx(ctx, func(w *wtx) error {
		return w.queryRow(qWorkerUpsert, r.Worker, r.Host, r.PID, r.Running, w.now).Scan(&draining)
	})
	return draining, err
}

func (d *opsDB) WorkerList(ctx context.Context, since time.Time) ([]jobs.WorkerInfo, error) {
	return readAll(ctx, d.store(), scanWorker, qWorkerList, since.UnixMicro())
}

// WorkerDrain writes in a transaction of its own.
func (d *opsDB) WorkerDrain(ctx context.Context, worker string, drain bool) (jobs.WorkerInfo, error) {
	var out jobs.WorkerInfo
	err := d.store().tx(ctx, func(w *wtx) error {
		var err error
		out, err = scanWorker(w.queryRow(qWorkerDrain, worker, drain))
		return notFound(err)
	})
	return out, err
}
