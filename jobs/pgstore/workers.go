package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/jobs"
)

// Workers (migration 00018): one row per worker process, as it last
// reported itself (jobs.Store.ReportWorker). Written outside the event
// lock: they move no job.

const workerCols = `worker, host, pid, running, started_at, seen_at, draining`

const (
	workerUpsertSQL = `INSERT INTO workers (worker, host, pid, running, started_at, seen_at) VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT (worker) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, running = EXCLUDED.running,
			seen_at = EXCLUDED.seen_at
		RETURNING draining`
	workerDrainSQL = `UPDATE workers SET draining = $2 WHERE worker = $1 RETURNING ` + workerCols
	workerListSQL  = `SELECT ` + workerCols + ` FROM workers WHERE seen_at >= $1 ORDER BY worker`
)

func scanWorker(row pgx.Row) (jobs.WorkerInfo, error) {
	var w jobs.WorkerInfo
	if err := row.Scan(&w.Worker, &w.Host, &w.PID, &w.Running, &w.StartedAt, &w.SeenAt, &w.Draining); err != nil {
		return jobs.WorkerInfo{}, err
	}
	w.StartedAt, w.SeenAt = w.StartedAt.UTC(), w.SeenAt.UTC()
	return w, nil
}

func (d *opsDB) WorkerUpsert(ctx context.Context, r jobs.WorkerReport) (bool, error) {
	var draining bool
	err := d.pool.QueryRow(ctx, workerUpsertSQL, r.Worker, r.Host, r.PID, r.Running, d.store().clock()).Scan(&draining)
	return draining, err
}

func (d *opsDB) WorkerList(ctx context.Context, since time.Time) ([]jobs.WorkerInfo, error) {
	rows, err := d.pool.Query(ctx, workerListSQL, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.WorkerInfo, error) { return scanWorker(r) })
}

func (d *opsDB) WorkerDrain(ctx context.Context, worker string, drain bool) (jobs.WorkerInfo, error) {
	w, err := scanWorker(d.pool.QueryRow(ctx, workerDrainSQL, worker, drain))
	return w, notFound(err)
}
