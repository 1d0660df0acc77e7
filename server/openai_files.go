package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
)

// Files and batches in OpenAI's shapes. They are org-scoped like prompts:
// a member sees the files and batches it created, an admin every one of
// its org; other IDs answer 404.

const (
	// transferTimeout bounds an upload or a download of a file, instead
	// of the server's read and write timeouts, which a 200 MB file on a
	// slow link would outlast.
	transferTimeout = 30 * time.Minute
	// multipartSlack is what an upload's body may hold beyond its file:
	// boundaries, part headers and the purpose field.
	multipartSlack  = 64 << 10
	maxPurposeBytes = 64
	maxFilename     = 255
	// batchWindow is the one completion window OpenAI offers.
	batchWindow     = "24h"
	batchWindowTime = 24 * time.Hour
	// maxOpenAIListLimit is OpenAI's bound of a files page; promptkit
	// returns at most jobs.MaxListLimit.
	maxOpenAIListLimit = 10000
)

func (s *Server) maxFileBytes() int64 {
	return cmp.Or(max(s.cfg.MaxFileBytes, 0), jobs.DefaultMaxFileBytes)
}

// oaInvalid answers 400 invalid_request_error for a parameter.
func oaInvalid(w http.ResponseWriter, param, code, msg string) {
	oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, param, code, msg)
}

func oaTooLarge(w http.ResponseWriter, limit int64) {
	oaError(w, http.StatusRequestEntityTooLarge, openaiapi.TypeInvalidRequest, "file", "file_too_large",
		fmt.Sprintf("The file is over the server's limit of %d bytes.", limit))
}

// uploadFile answers POST /v1/files: multipart/form-data with purpose
// "batch" and a file part. The file is streamed to a temporary file (at
// most MaxFileBytes; 413 beyond, without reading further) and stored from
// there, so the upload is never held whole in memory.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		oaInvalid(w, "", "invalid_content_type", "The body must be multipart/form-data with the fields purpose and file.")
		return
	}
	limit := s.maxFileBytes()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(transferTimeout))
	_ = rc.SetWriteDeadline(time.Now().Add(transferTimeout + 10*time.Second))
	r.Body = http.MaxBytesReader(w, r.Body, limit+multipartSlack)
	mr, err := r.MultipartReader()
	if err != nil {
		oaInvalid(w, "", "invalid_body", "The multipart body could not be read.")
		return
	}
	var purpose, filename string
	var tmp *os.File
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	readErr := func(err error) {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			oaTooLarge(w, limit)
			return
		}
		oaInvalid(w, "", "invalid_body", "The multipart body could not be read.")
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr(err)
			return
		}
		switch part.FormName() {
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(part, maxPurposeBytes+1))
			if err != nil {
				readErr(err)
				return
			}
			if purpose = string(b); purpose != jobs.PurposeBatch {
				oaInvalid(w, "purpose", "invalid_value", "purpose must be \"batch\": promptkit stores batch input files only.")
				return
			}
		case "file":
			if tmp != nil {
				oaInvalid(w, "file", "invalid_value", "Send one file per upload.")
				return
			}
			if filename = part.FileName(); filename == "" || len(filename) > maxFilename {
				oaInvalid(w, "file", "invalid_value", fmt.Sprintf("The file part needs a filename of at most %d bytes.", maxFilename))
				return
			}
			if tmp, err = os.CreateTemp("", "promptkit-upload-*"); err != nil {
				s.oaInternal(w, r, "spooling an upload", err)
				return
			}
			n, err := io.Copy(tmp, io.LimitReader(part, limit+1))
			if _, ok := errors.AsType[*fs.PathError](err); ok {
				s.oaInternal(w, r, "spooling an upload", err) // the temporary file, not the upload
				return
			}
			if err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); !ok {
					readErr(err)
					return
				}
				n = limit + 1
			}
			if n > limit {
				// Close the connection rather than read the rest.
				w.Header().Set("Connection", "close")
				oaTooLarge(w, limit)
				return
			}
		default:
			oaInvalid(w, "", "unknown_parameter", "The upload has an unrecognized field; send purpose and file only.")
			return
		}
	}
	switch {
	case tmp == nil:
		oaInvalid(w, "file", "missing_required_parameter", "file is required.")
		return
	case purpose == "":
		oaInvalid(w, "purpose", "missing_required_parameter", "purpose is required.")
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		s.oaInternal(w, r, "spooling an upload", err)
		return
	}
	f, err := s.st.CreateFile(r.Context(), jobs.CreateFileParams{
		OrgID: id.org, CreatedBy: id.user, Purpose: purpose, Filename: filename, Content: tmp, MaxBytes: limit,
	})
	if errors.Is(err, jobs.ErrFileTooLarge) {
		oaTooLarge(w, limit)
		return
	}
	if err != nil {
		s.oaFailure(w, r, "file", err)
		return
	}
	s.log.Info("file uploaded", "file_id", f.ID, "org", id.org, "bytes", f.Bytes)
	writeJSON(w, http.StatusOK, openaiapi.FileObject(f))
}

// oaLimit parses ?limit= (1–max; empty: the store's default), answering
// 400 itself.
func oaLimit(w http.ResponseWriter, r *http.Request, most int) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		oaInvalid(w, "limit", "invalid_value", fmt.Sprintf("limit must be an integer from 1 to %d.", most))
		return 0, false
	}
	return min(n, jobs.MaxListLimit), true
}

// ownedPage reads pages from list until it has limit items the identity
// may see, or the listing ends. Admins see every item of the org, so for
// them it is one read; for a member, others' items are skipped.
func ownedPage[T any](limit int, after string, list func(after string, limit int) ([]T, bool, error), key func(T) (id, org, createdBy string), who identity) ([]T, bool, error) {
	limit = cmp.Or(limit, jobs.DefaultListLimit)
	var out []T
	for {
		page, more, err := list(after, limit)
		if err != nil {
			return nil, false, err
		}
		for _, it := range page {
			if _, org, by := key(it); who.owns(org, by) {
				if len(out) == limit {
					return out, true, nil
				}
				out = append(out, it)
			}
		}
		if !more || len(page) == 0 {
			return out, false, nil
		}
		if len(out) == limit {
			// More follow, though perhaps none the identity may see: a
			// page after this one may be empty, as OpenAI allows.
			return out, true, nil
		}
		after, _, _ = key(page[len(page)-1])
	}
}

func fileKey(f jobs.File) (string, string, string)   { return f.ID, f.OrgID, f.CreatedBy }
func batchKey(b jobs.Batch) (string, string, string) { return b.ID, b.OrgID, b.CreatedBy }
func fileID(f openaiapi.File) string                 { return f.ID }
func batchID(b openaiapi.Batch) string               { return b.ID }

// listFiles answers GET /v1/files: newest first, with after, limit and
// purpose (order may only be desc).
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	q := r.URL.Query()
	limit, ok := oaLimit(w, r, maxOpenAIListLimit)
	if !ok {
		return
	}
	if o := q.Get("order"); o != "" && o != "desc" {
		oaInvalid(w, "order", "unsupported_value", "order may only be desc: files are listed newest first.")
		return
	}
	files, more, err := ownedPage(limit, q.Get("after"), func(after string, limit int) ([]jobs.File, bool, error) {
		return s.st.ListFiles(r.Context(), jobs.FileListParams{OrgID: id.org, Purpose: q.Get("purpose"), After: after, Limit: limit})
	}, fileKey, id)
	if err != nil {
		s.oaFailure(w, r, "file", err)
		return
	}
	data := make([]openaiapi.File, 0, len(files))
	for _, f := range files {
		data = append(data, openaiapi.FileObject(f))
	}
	writeJSON(w, http.StatusOK, openaiapi.NewList(data, fileID, more))
}

// ownedFile reads a file the identity may see.
func (s *Server) ownedFile(r *http.Request, id identity) (jobs.File, error) {
	f, err := s.st.GetFile(r.Context(), id.org, r.PathValue("id"))
	if err != nil {
		return f, err
	}
	if !id.owns(f.OrgID, f.CreatedBy) {
		return jobs.File{}, jobs.ErrNotFound
	}
	return f, nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	f, err := s.ownedFile(r, identityOf(r))
	if err != nil {
		s.oaFailure(w, r, "file", err)
		return
	}
	writeJSON(w, http.StatusOK, openaiapi.FileObject(f))
}

// fileContent answers GET /v1/files/{id}/content, streaming the stored
// chunks.
func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	f, err := s.ownedFile(r, id)
	if err != nil {
		s.oaFailure(w, r, "file", err)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(transferTimeout))
	// The headers go with the first chunk, so a file deleted in between
	// is still a clean 404.
	lw := &lazyWriter{w: w, start: func() {
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		if f.Purpose == jobs.PurposeBatch || f.Purpose == jobs.PurposeBatchOutput || strings.HasSuffix(f.Filename, ".jsonl") {
			h.Set("Content-Type", "application/jsonl")
		}
		h.Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
		w.WriteHeader(http.StatusOK)
	}}
	if err := s.st.ReadFile(r.Context(), id.org, f.ID, lw); err != nil {
		if lw.started {
			// Too late for an error answer: the short body tells the client.
			s.log.Warn("file download cut short", "file_id", f.ID, "err", err)
			return
		}
		s.oaFailure(w, r, "file", err)
		return
	}
	if !lw.started {
		lw.start() // an empty file
	}
}

// lazyWriter calls start before its first write.
type lazyWriter struct {
	w       io.Writer
	start   func()
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start()
	}
	return l.w.Write(p)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	f, err := s.ownedFile(r, id)
	if err == nil {
		err = s.st.DeleteFile(r.Context(), id.org, f.ID)
	}
	if err != nil {
		s.oaFailure(w, r, "file", err)
		return
	}
	s.log.Info("file deleted", "file_id", f.ID, "org", id.org)
	writeJSON(w, http.StatusOK, openaiapi.DeletedFile{ID: f.ID, Object: "file", Deleted: true})
}

// createBatch answers POST /v1/batches: a batch of the caller's batch
// input file, in status validating; jobs/batch drives it from there.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	body, ok := s.oaBody(w, r)
	if !ok {
		return
	}
	req, err := openaiapi.DecodeBatchRequest(body)
	if re, ok := errors.AsType[*openaiapi.RequestError](err); ok {
		writeJSON(w, http.StatusBadRequest, re.Body())
		return
	} else if err != nil {
		s.oaInternal(w, r, "decoding", err)
		return
	}
	f, err := s.st.GetFile(r.Context(), id.org, req.InputFileID)
	switch {
	case errors.Is(err, jobs.ErrNotFound) || err == nil && (!id.owns(f.OrgID, f.CreatedBy) || f.Purpose != jobs.PurposeBatch):
		oaInvalid(w, "input_file_id", "invalid_value", "input_file_id must name a file you uploaded with purpose batch.")
		return
	case err != nil:
		s.oaFailure(w, r, "batch", err)
		return
	}
	var meta json.RawMessage
	if req.Metadata != nil {
		meta, _ = json.Marshal(req.Metadata) // cannot fail: strings
	}
	b, err := s.st.CreateBatch(r.Context(), jobs.CreateBatchParams{
		OrgID: id.org, CreatedBy: id.user, InputFileID: f.ID, Endpoint: req.Endpoint,
		CompletionWindow: req.CompletionWindow, Window: batchWindowTime, Metadata: meta,
		Priority: s.cfg.BatchPriority,
	})
	if errors.Is(err, jobs.ErrNotFound) {
		oaInvalid(w, "input_file_id", "invalid_value", "input_file_id must name a file you uploaded with purpose batch.")
		return
	}
	if err != nil {
		// ErrInvalid here is the server's BatchPriority: not the caller's
		// fault.
		s.oaInternal(w, r, "creating a batch", err)
		return
	}
	s.log.Info("batch created", "batch_id", b.ID, "input_file_id", f.ID, "org", id.org)
	writeJSON(w, http.StatusOK, openaiapi.BatchObject(b))
}

// ownedBatch reads a batch the identity may see.
func (s *Server) ownedBatch(r *http.Request, id identity) (jobs.Batch, error) {
	b, err := s.st.GetBatch(r.Context(), id.org, r.PathValue("id"))
	if err != nil {
		return b, err
	}
	if !id.owns(b.OrgID, b.CreatedBy) {
		return jobs.Batch{}, jobs.ErrNotFound
	}
	return b, nil
}

// getBatch answers GET /v1/batches/{id}. With ?wait= (promptkit's, at
// most MaxWait) it holds the request until the batch is terminal or the
// wait ends, so a client need not poll: the store's notifications (a
// batch status or job state changed) make it look again.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	wait, ok := s.parseWait(r)
	if !ok {
		oaError(w, http.StatusBadRequest, openaiapi.TypeInvalidRequest, "wait", "invalid_value", errWaitParam)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wake <-chan struct{}
	if wait > 0 {
		// Subscribed before the first read, so no change is missed.
		wake = s.st.Notify(ctx)
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		b, err := s.ownedBatch(r, identityOf(r))
		if err != nil {
			s.oaFailure(w, r, "batch", err)
			return
		}
		if wait == 0 || b.Status.Terminal() {
			writeJSON(w, http.StatusOK, openaiapi.BatchObject(b))
			return
		}
		select {
		case _, open := <-wake:
			if !open {
				wait = 0 // the store closed: answer what we have
			}
		case <-timer.C:
			wait = 0
		case <-ctx.Done():
			return // the client left
		case <-s.streams.Done():
			wait = 0
		}
	}
}

// listBatches answers GET /v1/batches: newest first, with after and
// limit.
func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	limit, ok := oaLimit(w, r, jobs.MaxListLimit)
	if !ok {
		return
	}
	bs, more, err := ownedPage(limit, r.URL.Query().Get("after"), func(after string, limit int) ([]jobs.Batch, bool, error) {
		return s.st.ListBatches(r.Context(), jobs.BatchListParams{OrgID: id.org, After: after, Limit: limit})
	}, batchKey, id)
	if err != nil {
		s.oaFailure(w, r, "batch", err)
		return
	}
	data := make([]openaiapi.Batch, 0, len(bs))
	for _, b := range bs {
		data = append(data, openaiapi.BatchObject(b))
	}
	writeJSON(w, http.StatusOK, openaiapi.NewList(data, batchID, more))
}

// cancelBatch answers POST /v1/batches/{id}/cancel: a validating or
// in_progress batch moves to cancelling (the batch processor cancels its
// jobs and writes what finished); one already cancelling or cancelled is
// returned as it is; any other is a 409.
func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	b, err := s.ownedBatch(r, id)
	if err != nil {
		s.oaFailure(w, r, "batch", err)
		return
	}
	c, err := s.st.CancelBatch(r.Context(), id.org, b.ID)
	if errors.Is(err, jobs.ErrBatchChanged) {
		if now, gerr := s.st.GetBatch(r.Context(), id.org, b.ID); gerr == nil {
			b = now
		}
		oaError(w, http.StatusConflict, openaiapi.TypeInvalidRequest, "", "batch_not_cancellable",
			fmt.Sprintf("A batch that is %s cannot be cancelled.", b.Status))
		return
	}
	if err != nil {
		s.oaFailure(w, r, "batch", err)
		return
	}
	s.log.Info("batch cancelled", "batch_id", c.ID, "org", id.org, "status", c.Status)
	writeJSON(w, http.StatusOK, openaiapi.BatchObject(c))
}
