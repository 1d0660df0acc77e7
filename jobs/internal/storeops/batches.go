package storeops

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/batchdb"
)

// CreateBatch stores a batch in status validating, only if its input file
// is the org's. See jobs.Store.
func (o Ops) CreateBatch(ctx context.Context, p jobs.CreateBatchParams) (jobs.Batch, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Batch{}, o.fail("create batch", err)
	}
	var b jobs.Batch
	err = o.db.WriteTx(ctx, func(tx Tx) error {
		var err error
		b, err = tx.BatchInsert(BatchInsertParams{ID: batchPrefix + jobs.NewID(), OrgID: p.OrgID, CreatedBy: p.CreatedBy,
			TokenID: p.TokenID, InputFileID: p.InputFileID, Endpoint: p.Endpoint, CompletionWindow: p.CompletionWindow, Metadata: p.Metadata,
			Priority: *p.Priority, Window: p.Window})
		if errors.Is(err, jobs.ErrNotFound) {
			err = fmt.Errorf("input file: %w", err)
		}
		return err
	})
	o.db.Wrote(ctx, "create batch", err, err == nil)
	if err != nil {
		return jobs.Batch{}, o.fail("create batch", err)
	}
	return b, nil
}

// GetBatch returns a batch, with its jobs' counts while they run. See
// jobs.Store.
func (o Ops) GetBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	b, err := o.db.BatchGet(ctx, BatchGetParams{ID: id, OrgID: orgID})
	if err == nil {
		b, err = o.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, o.fail("get batch", err)
	}
	return b, nil
}

// ListBatches reads one batch past the page to say whether more follow.
// See jobs.Store.
func (o Ops) ListBatches(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, bool, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, false, o.fail("list batches", err)
	}
	limit := p.Limit
	p.Limit++
	out, err := o.db.BatchList(ctx, p)
	if err == nil {
		err = o.liveCountsAll(ctx, out)
	}
	if err != nil {
		return nil, false, o.fail("list batches", err)
	}
	out, more := page(out, limit)
	return out, more, nil
}

// ActiveBatches returns every unfinished batch, oldest first, with its
// stored counts: counting a big batch's jobs takes seconds, and the batch
// processor, which lists them every second, counts when it needs to. See
// jobs.Store.
func (o Ops) ActiveBatches(ctx context.Context) ([]jobs.Batch, error) {
	out, err := o.db.BatchListActive(ctx)
	if err != nil {
		return nil, o.fail("active batches", err)
	}
	return out, nil
}

// MoveBatch moves a batch From → To, only if it is From. See jobs.Store.
func (o Ops) MoveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	b, err := o.moveBatch(ctx, p)
	if err != nil {
		return jobs.Batch{}, o.fail("move batch", err)
	}
	return b, nil
}

func (o Ops) moveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Batch{}, err
	}
	errs, err := batchdb.EncodeErrors(p.Errors)
	if err != nil {
		return jobs.Batch{}, err
	}
	var b jobs.Batch
	err = o.db.WriteTx(ctx, func(tx Tx) error {
		var err error
		b, err = move(tx, BatchMoveParams{ID: p.ID, From: p.From, To: p.To, SetErrors: p.Errors != nil, Errors: errs, Counts: p.Counts})
		return err
	})
	o.db.Wrote(ctx, "move batch", err, err == nil)
	if err != nil {
		return jobs.Batch{}, err
	}
	o.db.Changed()
	return o.liveCounts(ctx, b)
}

// move moves a batch p.From → p.To in tx. A batch in another status is
// jobs.ErrBatchChanged, naming the status it is in, and nothing changes.
func move(tx Tx, p BatchMoveParams) (jobs.Batch, error) {
	b, err := tx.BatchMove(p)
	if !errors.Is(err, jobs.ErrNotFound) {
		return b, err
	}
	if b, err = tx.BatchGet(BatchGetParams{ID: p.ID}); err != nil {
		return jobs.Batch{}, err
	}
	return jobs.Batch{}, fmt.Errorf("%w: batch is %s, not %s", jobs.ErrBatchChanged, b.Status, p.From)
}

// CancelBatch does what jobs.BatchStatus.CancelTo says, reading the batch
// with its row locked until the move, so no other write moves it in
// between. See jobs.Store.
func (o Ops) CancelBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	var b jobs.Batch
	moved := false
	err := o.db.WriteTx(ctx, func(tx Tx) error {
		var err error
		if b, err = tx.BatchGet(BatchGetParams{ID: id, OrgID: orgID, ForUpdate: true}); err != nil {
			return err
		}
		to, err := b.Status.CancelTo()
		if err != nil || to == b.Status {
			return err
		}
		b, err = move(tx, BatchMoveParams{ID: id, From: b.Status, To: to})
		moved = err == nil
		return err
	})
	moved = moved && err == nil
	o.db.Wrote(ctx, "cancel batch", err, moved)
	if moved {
		o.db.Changed()
	}
	if err == nil {
		b, err = o.liveCounts(ctx, b)
	}
	if err != nil {
		return jobs.Batch{}, o.fail("cancel batch", err)
	}
	return b, nil
}

// FinishBatch ends a batch in one transaction, in this order:
//
//  1. the batch moves From → To with its counts, first, so that a batch
//     no longer From stores no file (and a concurrent FinishBatch waits
//     for the row, then finds it moved);
//  2. the output file, then the error file, each when its reader is set;
//  3. the batch names them.
//
// See jobs.Store.
func (o Ops) FinishBatch(ctx context.Context, p jobs.FinishBatchParams) (jobs.Batch, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.Batch{}, o.fail("finish batch", err)
	}
	var b jobs.Batch
	var stored int64
	err = o.db.WriteTx(ctx, func(tx Tx) error {
		stored = 0
		var err error
		if b, err = move(tx, BatchMoveParams{ID: p.ID, From: p.From, To: p.To, Counts: &p.Counts}); err != nil {
			return err
		}
		outputs := BatchSetOutputsParams{ID: p.ID}
		for _, out := range []struct {
			kind string
			r    io.Reader
			id   *string
		}{{"output", p.Output, &outputs.OutputFileID}, {"error", p.Errors, &outputs.ErrorFileID}} {
			if out.r == nil {
				continue
			}
			f, err := insertFile(tx, outputFile(b, out.kind, out.r))
			if err != nil {
				return fmt.Errorf("%s file: %w", out.kind, err)
			}
			*out.id = f.ID
			stored += f.Bytes
		}
		b, err = tx.BatchSetOutputs(outputs)
		return err
	})
	o.db.Wrote(ctx, "finish batch", err, err == nil)
	if err != nil {
		return jobs.Batch{}, o.fail("finish batch", err)
	}
	o.db.Changed()
	o.db.StoredFiles(ctx, stored)
	return b, nil
}

// BatchProgress counts the batch's current jobs by outcome. See
// jobs.Store.
func (o Ops) BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	p, err := o.db.BatchProgress(ctx, batchID)
	if err != nil {
		return jobs.BatchProgress{}, o.fail("batch progress", err)
	}
	return p, nil
}

// BatchResults reads a page of the batch's lines in three reads: the
// page of prompts, their jobs, and the responses of the newest jobs that
// succeeded. A job's response commits with its success, so a read after
// the job's never misses it. See jobs.Store.
func (o Ops) BatchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	out, err := o.batchResults(ctx, p)
	if err != nil {
		return nil, o.fail("batch results", err)
	}
	return out, nil
}

func (o Ops) batchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, err
	}
	prompts, err := o.db.BatchPromptList(ctx, p)
	if err != nil || len(prompts) == 0 {
		return nil, err
	}
	ids := make([]string, len(prompts))
	for i, pr := range prompts {
		ids[i] = pr.ID
	}
	js, err := o.db.PromptJobList(ctx, ids)
	if err != nil {
		return nil, err
	}
	return results(prompts, js, func(ids []string) (map[string]jobs.Response, error) {
		return o.db.ResponseList(ctx, ids)
	})
}

// liveCounts returns b with the counts a reader sees: its jobs' while its
// status counts live (jobs.BatchStatus.CountsLive), its stored ones
// otherwise.
func (o Ops) liveCounts(ctx context.Context, b jobs.Batch) (jobs.Batch, error) {
	if !b.Status.CountsLive() {
		return b, nil
	}
	p, err := o.db.BatchProgress(ctx, b.ID)
	if err != nil {
		return jobs.Batch{}, err
	}
	b.Counts = p.Counts()
	return b, nil
}

// liveCountsAll applies liveCounts to each batch of bs, in place.
func (o Ops) liveCountsAll(ctx context.Context, bs []jobs.Batch) error {
	for i := range bs {
		var err error
		if bs[i], err = o.liveCounts(ctx, bs[i]); err != nil {
			return err
		}
	}
	return nil
}

// outputFile describes a finished batch's output or error file (kind
// "output" or "error"): purpose batch_output, owned like the batch.
func outputFile(b jobs.Batch, kind string, content io.Reader) jobs.CreateFileParams {
	return jobs.CreateFileParams{OrgID: b.OrgID, CreatedBy: b.CreatedBy, Purpose: jobs.PurposeBatchOutput,
		Filename: outputName(b.ID, kind), Content: content, MaxBytes: outputMax}
}

// results makes a BatchResults page: prompts in page order, js every job
// of those prompts oldest first (so a prompt's last is its newest), and
// responses reads the responses of the newest jobs that succeeded. A
// prompt without a job (none is left once archived) has no line.
func results(prompts []jobs.Prompt, js []jobs.Job, responses func(ids []string) (map[string]jobs.Response, error)) ([]jobs.BatchResult, error) {
	newest := make(map[string]jobs.Job, len(prompts))
	for _, j := range js {
		newest[j.PromptID] = j
	}
	var ids []string
	for _, j := range newest {
		if j.State == jobs.Succeeded && j.ResponseID != "" {
			ids = append(ids, j.ResponseID)
		}
	}
	resp, err := responses(ids)
	if err != nil {
		return nil, err
	}
	out := make([]jobs.BatchResult, 0, len(prompts))
	for _, p := range prompts {
		j, ok := newest[p.ID]
		if !ok {
			continue
		}
		r := jobs.BatchResult{Prompt: p, Job: j}
		if resp, ok := resp[j.ResponseID]; ok && j.State == jobs.Succeeded {
			r.Response = &resp
		}
		out = append(out, r)
	}
	return out, nil
}
