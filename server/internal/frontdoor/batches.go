package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

const (
	// batchWindowTime is the one completion window OpenAI offers ("24h").
	batchWindowTime = 24 * time.Hour
	// lookSpacing is how many times its last read took that GET
	// /v1/batches/{id}?wait= waits before reading the batch again.
	lookSpacing = 9
)

// badInputFile is the 400 of an input_file_id that names no batch input
// file of the caller's.
var badInputFile = httpapi.OpenAIInvalid("input_file_id", "invalid_value", "input_file_id must name a file you uploaded with purpose batch.")

// CreateBatch answers POST /v1/batches: a batch of the caller's batch
// input file, in status validating; jobs/batch drives it from there.
func (a *API) CreateBatch(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	body, err := httpapi.ReadBody(w, r, a.MaxBody)
	if err != nil {
		return err
	}
	req, err := openaiapi.DecodeBatchRequest(body)
	if err != nil {
		return httpapi.About("decoding", err)
	}
	// A spent budget refuses the batch now; the lines are checked again
	// as they run (worker.Config.Budget).
	if err := a.Jobs.Spendable(r.Context(), id); err != nil {
		return err
	}
	f, err := a.Store.GetFile(r.Context(), id.Org, req.InputFileID)
	switch {
	case errors.Is(err, jobs.ErrNotFound) || err == nil && (!id.Owns(f.OrgID, f.CreatedBy) || f.Purpose != jobs.PurposeBatch):
		return badInputFile
	case err != nil:
		return httpapi.About("batch", err)
	}
	var meta json.RawMessage
	if req.Metadata != nil {
		meta, _ = json.Marshal(req.Metadata) // cannot fail: strings
	}
	b, err := a.Store.CreateBatch(r.Context(), jobs.CreateBatchParams{
		OrgID: id.Org, CreatedBy: id.User, TokenID: id.TokenID(), InputFileID: f.ID, Endpoint: req.Endpoint,
		CompletionWindow: req.CompletionWindow, Window: batchWindowTime, Metadata: meta,
		Priority: a.BatchPriority,
	})
	if errors.Is(err, jobs.ErrNotFound) {
		return badInputFile
	}
	if err != nil {
		// ErrInvalid here is the server's BatchPriority: not the caller's
		// fault.
		return httpapi.Internal("creating a batch", err)
	}
	a.Log.Info("batch created", "batch_id", b.ID, "input_file_id", f.ID, "org", id.Org)
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.BatchObject(b))
	return nil
}

// ownedBatch reads a batch the identity may see.
func (a *API) ownedBatch(ctx context.Context, id auth.Identity, batchID string) (jobs.Batch, error) {
	b, err := a.Store.GetBatch(ctx, id.Org, batchID)
	if err != nil {
		return b, httpapi.About("batch", err)
	}
	if !id.Owns(b.OrgID, b.CreatedBy) {
		return jobs.Batch{}, httpapi.About("batch", jobs.ErrNotFound)
	}
	return b, nil
}

// GetBatch answers GET /v1/batches/{id}. With ?wait= (promptkit's, at
// most MaxWait) it holds the request until the batch is terminal or the
// wait ends, so a client need not poll: the store's notifications (a
// batch status or job state changed, in any process) make it look again.
func (a *API) GetBatch(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	wait, err := httpapi.Wait(r, a.MaxWait)
	if err != nil {
		return err
	}
	look := func(ctx context.Context) (jobs.Batch, bool, error) {
		b, err := a.ownedBatch(ctx, id, r.PathValue("id"))
		return b, err == nil && b.Status.Terminal(), err
	}
	var b jobs.Batch
	if wait == 0 {
		b, _, err = look(r.Context())
	} else {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		end, stop := context.WithTimeout(a.Jobs.Serving, wait)
		defer stop()
		// Reading an in_progress batch counts its jobs: seconds for a
		// million lines, and a busy queue notifies on every job. Spaced,
		// a waiting client spends at most a tenth of its time counting;
		// the changes meanwhile wake the next look, coalesced.
		spaced := func(ctx context.Context) (jobs.Batch, bool, error) {
			start := a.now()
			b, done, err := look(ctx)
			if err == nil && !done {
				// The pause ends with the wait, or the request.
				pause, stop := context.WithCancel(ctx)
				defer stop()
				defer context.AfterFunc(end, stop)()
				a.wait(pause, lookSpacing*a.now().Sub(start))
			}
			return b, done, err
		}
		// Subscribed before the first look, so no change is missed.
		b, err = jobs.Await(ctx, a.notifier().Notify(ctx), end.Done(), spaced)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.BatchObject(b))
	return nil
}

// ListBatches answers GET /v1/batches: newest first, with after and
// limit.
func (a *API) ListBatches(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	limit, err := httpapi.Limit(r, jobs.MaxListLimit)
	if err != nil {
		return err
	}
	bs, more, err := ownedPage(limit, r.URL.Query().Get("after"), func(after string, limit int) ([]jobs.Batch, bool, error) {
		return a.Store.ListBatches(r.Context(), jobs.BatchListParams{OrgID: id.Org, After: after, Limit: limit})
	}, batchKey, id)
	if err != nil {
		return httpapi.About("batch", err)
	}
	data := make([]openaiapi.Batch, 0, len(bs))
	for _, b := range bs {
		data = append(data, openaiapi.BatchObject(b))
	}
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.NewList(data, batchID, more))
	return nil
}

// CancelBatch answers POST /v1/batches/{id}/cancel: a validating or
// in_progress batch moves to cancelling (the batch processor cancels its
// jobs and writes what finished); one already cancelling or cancelled is
// returned as it is; any other is a 409.
func (a *API) CancelBatch(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	b, err := a.ownedBatch(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	c, err := a.Store.CancelBatch(r.Context(), id.Org, b.ID)
	if errors.Is(err, jobs.ErrBatchChanged) {
		if now, gerr := a.Store.GetBatch(r.Context(), id.Org, b.ID); gerr == nil {
			b = now
		}
		return &httpapi.Problem{Status: http.StatusConflict, Code: "batch_not_cancellable",
			Message: fmt.Sprintf("A batch that is %s cannot be cancelled.", b.Status)}
	}
	if err != nil {
		return httpapi.About("batch", err)
	}
	a.Log.Info("batch cancelled", "batch_id", c.ID, "org", id.Org, "status", c.Status)
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.BatchObject(c))
	return nil
}
