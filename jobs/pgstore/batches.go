package pgstore

import (
	"context"
	"errors"
	"io"

	"github.com/promptkit/promptkit/jobs"
)

// Placeholders until files and batches are stored; replaced by the real
// implementation.
var errTODO = errors.New("not implemented yet")

func (s *Store) CreateFile(ctx context.Context, p jobs.CreateFileParams) (jobs.File, error) {
	return jobs.File{}, errTODO
}
func (s *Store) GetFile(ctx context.Context, orgID, id string) (jobs.File, error) {
	return jobs.File{}, errTODO
}
func (s *Store) ListFiles(ctx context.Context, p jobs.FileListParams) ([]jobs.File, bool, error) {
	return nil, false, errTODO
}
func (s *Store) ReadFile(ctx context.Context, orgID, id string, w io.Writer) error { return errTODO }
func (s *Store) DeleteFile(ctx context.Context, orgID, id string) error            { return errTODO }
func (s *Store) CreateBatch(ctx context.Context, p jobs.CreateBatchParams) (jobs.Batch, error) {
	return jobs.Batch{}, errTODO
}
func (s *Store) GetBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	return jobs.Batch{}, errTODO
}
func (s *Store) ListBatches(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, bool, error) {
	return nil, false, errTODO
}
func (s *Store) ActiveBatches(ctx context.Context) ([]jobs.Batch, error) { return nil, errTODO }
func (s *Store) MoveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	return jobs.Batch{}, errTODO
}
func (s *Store) CancelBatch(ctx context.Context, orgID, id string) (jobs.Batch, error) {
	return jobs.Batch{}, errTODO
}
func (s *Store) FinishBatch(ctx context.Context, p jobs.FinishBatchParams) (jobs.Batch, error) {
	return jobs.Batch{}, errTODO
}
func (s *Store) BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error) {
	return jobs.BatchProgress{}, errTODO
}
func (s *Store) CancelBatchJobs(ctx context.Context, batchID string) (int, error) { return 0, errTODO }
func (s *Store) BatchResults(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.BatchResult, error) {
	return nil, errTODO
}
