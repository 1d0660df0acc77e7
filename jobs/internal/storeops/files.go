package storeops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/internal/health"
)

// filePrefix and batchPrefix begin the IDs the stores make (OpenAI's
// shapes: "file-…", "batch_…").
const (
	filePrefix  = "file-"
	batchPrefix = "batch_"
)

// readChunks reads r to its end in jobs.FileChunkSize chunks and calls
// store with each, numbered from 0; it returns the number of bytes read.
// More than max bytes is jobs.ErrFileTooLarge, found after reading at
// most max+1 bytes. The chunk's bytes are only valid during the call. A
// failing reader's error is marked as the caller's (health.Caller): it
// says nothing about the database.
func readChunks(r io.Reader, max int64, store func(seq int, data []byte) error) (int64, error) {
	lim := io.LimitReader(r, max+1)
	if max == math.MaxInt64 {
		lim = r
	}
	buf := make([]byte, jobs.FileChunkSize)
	var total int64
	for seq := 0; ; seq++ {
		n, err := io.ReadFull(lim, buf)
		total += int64(n)
		if total > max {
			return total, fmt.Errorf("%w: more than %d bytes", jobs.ErrFileTooLarge, max)
		}
		if n > 0 {
			if err := store(seq, buf[:n]); err != nil {
				return total, err
			}
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return total, nil
		case err != nil:
			return total, health.Caller(fmt.Errorf("read content: %w", err))
		}
	}
}

// CreateFile reads the content inside the write transaction, so a file
// over the limit rolls back whole. See jobs.Store.
func (o Ops) CreateFile(ctx context.Context, p jobs.CreateFileParams) (jobs.File, error) {
	p, err := p.Normalize()
	if err != nil {
		return jobs.File{}, o.fail("create file", err)
	}
	var f jobs.File
	err = o.db.WriteTx(ctx, func(tx Tx) error {
		var err error
		f, err = insertFile(tx, p)
		return err
	})
	o.db.Wrote(ctx, "create file", err, err == nil)
	if err != nil {
		return jobs.File{}, o.fail("create file", err)
	}
	o.db.StoredFiles(ctx, f.Bytes)
	return f, nil
}

// insertFile stores a normalized file in tx: its row first, so the
// chunks' foreign key holds, then its content a chunk at a time, then its
// size.
func insertFile(tx Tx, p jobs.CreateFileParams) (jobs.File, error) {
	id := filePrefix + jobs.NewID()
	err := tx.FileInsert(FileInsertParams{ID: id, OrgID: p.OrgID, CreatedBy: p.CreatedBy, Purpose: p.Purpose, Filename: p.Filename})
	if err != nil {
		return jobs.File{}, fmt.Errorf("insert file: %w", err)
	}
	n, err := readChunks(p.Content, p.MaxBytes, func(seq int, data []byte) error {
		return tx.FileChunkInsert(FileChunkInsertParams{FileID: id, Seq: seq, Data: data})
	})
	if err != nil {
		return jobs.File{}, err
	}
	return tx.FileSetBytes(FileSetBytesParams{ID: id, Bytes: n})
}

// GetFile returns a file's description. See jobs.Store.
func (o Ops) GetFile(ctx context.Context, orgID, id string) (jobs.File, error) {
	f, err := o.db.FileGet(ctx, FileGetParams{ID: id, OrgID: orgID})
	if err != nil {
		return jobs.File{}, o.fail("get file", err)
	}
	return f, nil
}

// ListFiles reads one file past the page to say whether more follow. See
// jobs.Store.
func (o Ops) ListFiles(ctx context.Context, p jobs.FileListParams) ([]jobs.File, bool, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, false, o.fail("list files", err)
	}
	limit := p.Limit
	p.Limit++
	out, err := o.db.FileList(ctx, p)
	if err != nil {
		return nil, false, o.fail("list files", err)
	}
	out, more := page(out, limit)
	return out, more, nil
}

// ReadFile writes a file's content to w, one read per chunk, none held
// open while w writes. A file deleted meanwhile ends the copy with
// jobs.ErrNotFound. See jobs.Store.
func (o Ops) ReadFile(ctx context.Context, orgID, id string, w io.Writer) error {
	f, err := o.db.FileGet(ctx, FileGetParams{ID: id, OrgID: orgID})
	if err != nil {
		return o.fail("read file", err)
	}
	var n int64
	for seq := 0; n < f.Bytes; seq++ {
		data, err := o.db.FileChunkGet(ctx, FileChunkGetParams{FileID: id, Seq: seq})
		if err != nil {
			return o.fail("read file", fmt.Errorf("chunk %d: %w", seq, err))
		}
		if _, err := w.Write(data); err != nil {
			return o.fail("read file", err)
		}
		n += int64(len(data))
	}
	return nil
}

// DeleteFile deletes a file and its content. See jobs.Store.
func (o Ops) DeleteFile(ctx context.Context, orgID, id string) error {
	err := o.db.WriteTx(ctx, func(tx Tx) error { return tx.FileDelete(FileGetParams{ID: id, OrgID: orgID}) })
	o.db.Wrote(ctx, "delete file", err, err == nil)
	if err != nil {
		return o.fail("delete file", err)
	}
	return nil
}

// outputName is the filename of a finished batch's output or error file
// (kind "output" or "error"), as OpenAI names them.
func outputName(batchID, kind string) string { return batchID + "_" + kind + ".jsonl" }

// outputMax caps a batch's output and error files: none, since the
// batch's lines were already accepted.
const outputMax = math.MaxInt64
