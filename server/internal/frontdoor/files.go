package frontdoor

import (
	"cmp"
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
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
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
	// maxOpenAIListLimit is OpenAI's bound of a files page; promptkit
	// returns at most jobs.MaxListLimit.
	maxOpenAIListLimit = 10000
)

func (a *API) maxFileBytes() int64 {
	return cmp.Or(max(a.MaxFile, 0), jobs.DefaultMaxFileBytes)
}

// fileTooLarge is the 413 of an upload over limit bytes.
func fileTooLarge(limit int64) error {
	return &httpapi.Problem{Status: http.StatusRequestEntityTooLarge, Code: "file_too_large", Param: "file",
		Message: fmt.Sprintf("The file is over the server's limit of %d bytes.", limit)}
}

// readError is the answer to a multipart body that could not be read:
// over the limit, or broken.
func readError(err error, limit int64) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return fileTooLarge(limit)
	}
	return httpapi.OpenAIInvalid("", "invalid_body", "The multipart body could not be read.")
}

// UploadFile answers POST /v1/files: multipart/form-data with purpose
// "batch" and a file part. The file is streamed to a temporary file (at
// most MaxFile; 413 beyond, without reading further) and stored from
// there, so the upload is never held whole in memory.
func (a *API) UploadFile(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		return httpapi.OpenAIInvalid("", "invalid_content_type", "The body must be multipart/form-data with the fields purpose and file.")
	}
	limit := a.maxFileBytes()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(transferTimeout))
	_ = rc.SetWriteDeadline(time.Now().Add(transferTimeout + 10*time.Second))
	r.Body = http.MaxBytesReader(w, r.Body, limit+multipartSlack)
	mr, err := r.MultipartReader()
	if err != nil {
		return readError(err, limit)
	}
	var purpose, filename string
	var tmp *os.File
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return readError(err, limit)
		}
		switch part.FormName() {
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(part, maxPurposeBytes+1))
			if err != nil {
				return readError(err, limit)
			}
			if purpose = string(b); purpose != jobs.PurposeBatch {
				return httpapi.OpenAIInvalid("purpose", "invalid_value", "purpose must be \"batch\": promptkit stores batch input files only.")
			}
		case "file":
			if tmp != nil {
				return httpapi.OpenAIInvalid("file", "invalid_value", "Send one file per upload.")
			}
			if filename = part.FileName(); filename == "" || len(filename) > maxFilename {
				return httpapi.OpenAIInvalid("file", "invalid_value", fmt.Sprintf("The file part needs a filename of at most %d bytes.", maxFilename))
			}
			if tmp, err = os.CreateTemp("", "promptkit-upload-*"); err != nil {
				return httpapi.Internal("spooling an upload", err)
			}
			n, err := io.Copy(tmp, io.LimitReader(part, limit+1))
			if _, ok := errors.AsType[*fs.PathError](err); ok {
				return httpapi.Internal("spooling an upload", err) // the temporary file, not the upload
			}
			if err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); !ok {
					return readError(err, limit)
				}
				n = limit + 1
			}
			if n > limit {
				// Close the connection rather than read the rest.
				w.Header().Set("Connection", "close")
				return fileTooLarge(limit)
			}
		default:
			return httpapi.OpenAIInvalid("", "unknown_parameter", "The upload has an unrecognized field; send purpose and file only.")
		}
	}
	switch {
	case tmp == nil:
		return httpapi.OpenAIInvalid("file", "missing_required_parameter", "file is required.")
	case purpose == "":
		return httpapi.OpenAIInvalid("purpose", "missing_required_parameter", "purpose is required.")
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return httpapi.Internal("spooling an upload", err)
	}
	f, err := a.Store.CreateFile(r.Context(), jobs.CreateFileParams{
		OrgID: id.Org, CreatedBy: id.User, Purpose: purpose, Filename: filename, Content: tmp, MaxBytes: limit,
	})
	if errors.Is(err, jobs.ErrFileTooLarge) {
		return fileTooLarge(limit)
	}
	if err != nil {
		return httpapi.About("file", err)
	}
	a.Log.Info("file uploaded", "file_id", f.ID, "org", id.Org, "bytes", f.Bytes)
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.FileObject(f))
	return nil
}

// ownedPage reads pages from list until it has limit items the identity
// may see, or the listing ends. Admins see every item of the org, so for
// them it is one read; for a member, others' items are skipped.
func ownedPage[T any](limit int, after string, list func(after string, limit int) ([]T, bool, error), key func(T) (id, org, createdBy string), who auth.Identity) ([]T, bool, error) {
	limit = cmp.Or(limit, jobs.DefaultListLimit)
	var out []T
	for {
		page, more, err := list(after, limit)
		if err != nil {
			return nil, false, err
		}
		for _, it := range page {
			if _, org, by := key(it); who.Owns(org, by) {
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

// ListFiles answers GET /v1/files: newest first, with after, limit and
// purpose (order may only be desc).
func (a *API) ListFiles(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	q := r.URL.Query()
	limit, err := httpapi.Limit(r, maxOpenAIListLimit)
	if err != nil {
		return err
	}
	if o := q.Get("order"); o != "" && o != "desc" {
		return httpapi.OpenAIInvalid("order", "unsupported_value", "order may only be desc: files are listed newest first.")
	}
	files, more, err := ownedPage(min(limit, jobs.MaxListLimit), q.Get("after"), func(after string, limit int) ([]jobs.File, bool, error) {
		return a.Store.ListFiles(r.Context(), jobs.FileListParams{OrgID: id.Org, Purpose: q.Get("purpose"), After: after, Limit: limit})
	}, fileKey, id)
	if err != nil {
		return httpapi.About("file", err)
	}
	data := make([]openaiapi.File, 0, len(files))
	for _, f := range files {
		data = append(data, openaiapi.FileObject(f))
	}
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.NewList(data, fileID, more))
	return nil
}

// ownedFile reads a file the identity may see.
func (a *API) ownedFile(r *http.Request, id auth.Identity) (jobs.File, error) {
	f, err := a.Store.GetFile(r.Context(), id.Org, r.PathValue("id"))
	if err != nil {
		return f, httpapi.About("file", err)
	}
	if !id.Owns(f.OrgID, f.CreatedBy) {
		return jobs.File{}, httpapi.About("file", jobs.ErrNotFound)
	}
	return f, nil
}

// GetFile answers GET /v1/files/{id}.
func (a *API) GetFile(w http.ResponseWriter, r *http.Request) error {
	f, err := a.ownedFile(r, auth.Of(r))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.FileObject(f))
	return nil
}

// FileContent answers GET /v1/files/{id}/content, streaming the stored
// chunks.
func (a *API) FileContent(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	f, err := a.ownedFile(r, id)
	if err != nil {
		return err
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
	if err := a.Store.ReadFile(r.Context(), id.Org, f.ID, lw); err != nil {
		if lw.started {
			// Too late for an error answer: the short body tells the client.
			a.Log.Warn("file download cut short", "file_id", f.ID, "err", err)
			return nil
		}
		return httpapi.About("file", err)
	}
	if !lw.started {
		lw.start() // an empty file
	}
	return nil
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

// DeleteFile answers DELETE /v1/files/{id}.
func (a *API) DeleteFile(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	f, err := a.ownedFile(r, id)
	if err != nil {
		return err
	}
	if err := a.Store.DeleteFile(r.Context(), id.Org, f.ID); err != nil {
		return httpapi.About("file", err)
	}
	a.Log.Info("file deleted", "file_id", f.ID, "org", id.Org)
	httpapi.WriteJSON(w, http.StatusOK, openaiapi.DeletedFile{ID: f.ID, Object: "file", Deleted: true})
	return nil
}
