package storeops

import (
	"context"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// DB is one job store as Ops uses it: the statements that move file,
// batch and token rows, and the store's books. Its methods decide nothing;
// each translates "no row" into jobs.ErrNotFound.
type DB interface {
	// WriteTx runs fn in a write transaction of its own, committed when fn
	// returns nil and rolled back otherwise; it returns fn's error as it
	// is. The Tx is valid only during fn.
	WriteTx(ctx context.Context, fn func(Tx) error) error
	// Wrote records the outcome of a write for Check: op names the method
	// ("cancel batch"), stored says whether it stored anything.
	Wrote(ctx context.Context, op string, err error, stored bool)
	// Changed wakes this process's Notify subscribers once a batch status
	// change has committed. Other processes learn of it from the database
	// (PostgreSQL notifies in the statement that moves the batch, SQLite's
	// watcher sees the commit).
	Changed()
	// StoredFiles is told how many bytes of file content a committed
	// write stored (SQLite truncates its WAL after a large one).
	StoredFiles(ctx context.Context, bytes int64)

	// The reads, each outside any transaction.

	// FileGet reads a file's row.
	FileGet(ctx context.Context, p FileGetParams) (jobs.File, error)
	// FileList reads up to p.Limit files matching p (normalized), newest
	// first, after the file p.After (an unknown one: none).
	FileList(ctx context.Context, p jobs.FileListParams) ([]jobs.File, error)
	// FileChunkGet reads chunk Seq of a file's content.
	FileChunkGet(ctx context.Context, p FileChunkGetParams) ([]byte, error)
	// BatchGet reads a batch's row, with its stored counts.
	BatchGet(ctx context.Context, p BatchGetParams) (jobs.Batch, error)
	// BatchList reads up to p.Limit batches matching p (normalized),
	// newest first, after the batch p.After (an unknown one: none).
	BatchList(ctx context.Context, p jobs.BatchListParams) ([]jobs.Batch, error)
	// BatchListActive reads every batch that is not terminal, oldest
	// first.
	BatchListActive(ctx context.Context) ([]jobs.Batch, error)
	// BatchProgress reads batchdb.ProgressSQL's row for a batch.
	BatchProgress(ctx context.Context, batchID string) (jobs.BatchProgress, error)
	// BatchPromptList reads up to p.Limit prompts of batch p.BatchID with
	// IDs after p.After, in ID order.
	BatchPromptList(ctx context.Context, p jobs.BatchResultsParams) ([]jobs.Prompt, error)
	// PromptJobList reads every job of the prompts, oldest first
	// (created_at, then ID).
	PromptJobList(ctx context.Context, promptIDs []string) ([]jobs.Job, error)
	// ResponseList reads the responses with these IDs, by ID.
	ResponseList(ctx context.Context, ids []string) (map[string]jobs.Response, error)

	// Tokens: each write commits alone, each read is outside any
	// transaction.

	// TokenInsert inserts a token's row, stamped with the store's clock,
	// unless a token with its hash is stored (revoked or not): inserted
	// is false then, and nothing is stored.
	TokenInsert(ctx context.Context, p TokenInsertParams) (t jobs.Token, inserted bool, err error)
	// TokenRevoke stamps a token revoked, keeping the time of an earlier
	// revocation, and returns it.
	TokenRevoke(ctx context.Context, id string) (jobs.Token, error)
	// TokenList reads the tokens of an org (empty: every org), oldest
	// first (created_at, then ID).
	TokenList(ctx context.Context, orgID string) ([]jobs.Token, error)
	// TokenGetValid reads the token with this hash that is not revoked.
	TokenGetValid(ctx context.Context, hash []byte) (jobs.Token, error)
	// TokenExistsValid reports whether a token that is not revoked exists.
	TokenExistsValid(ctx context.Context) (bool, error)

	// Limits: each write commits alone.

	// LimitUpsert stores a normalized limit, replacing every field of the
	// one stored for its scope and subject, stamped with the store's
	// clock, and returns it.
	LimitUpsert(ctx context.Context, l jobs.Limit) (jobs.Limit, error)
	// LimitDelete deletes the limit of a scope and subject.
	LimitDelete(ctx context.Context, scope jobs.LimitScope, subject string) error
	// LimitList reads every limit, by scope, then subject.
	LimitList(ctx context.Context) ([]jobs.Limit, error)

	// LimitPause upserts only the paused flag of an org's limit (a new
	// row has no other limit), stamped with the store's clock, and
	// returns the limit.
	LimitPause(ctx context.Context, org string, paused bool) (jobs.Limit, error)
	// PacingHold sets the held flag of a backend's pacing row, inserting
	// the row if there is none.
	PacingHold(ctx context.Context, backend string, held bool) error

	// Workers: each write commits alone.

	// WorkerUpsert stores a normalized report, stamping seen_at (and
	// started_at on insert) with the store's clock, and returns whether
	// the worker is draining.
	WorkerUpsert(ctx context.Context, r jobs.WorkerReport) (bool, error)
	// WorkerList reads the workers seen at or after since, by worker.
	WorkerList(ctx context.Context, since time.Time) ([]jobs.WorkerInfo, error)
	// WorkerDrain sets a worker's draining flag and returns it;
	// jobs.ErrNotFound for an unknown worker.
	WorkerDrain(ctx context.Context, worker string, drain bool) (jobs.WorkerInfo, error)

	// CallsInsert adds normalized calls made for no job to the usage
	// ledger, in one transaction that commits alone.
	CallsInsert(ctx context.Context, p jobs.RecordCallsParams) error

	// ReservationDelete deletes a reservation, if it is there; it commits
	// alone.
	ReservationDelete(ctx context.Context, id string) error
	// ReservedRead sums the reservations of an org or a token that have
	// not expired at the store's time.
	ReservedRead(ctx context.Context, p jobs.ReservedParams) (jobs.Reserved, error)

	// PacingSync runs one sync of s; it decides nothing, the merge is
	// Go's (jobs.BackendPacing.Merge, through MergePacing). With
	// s.Backends empty it only reads, outside any transaction. Otherwise,
	// in a write transaction of its own, it reads the pacing rows of
	// s.News and s.Peer's pacing_peers rows on s.Backends, locked until
	// the transaction ends so that concurrent syncs of a backend merge one
	// after the other (a row not there yet is locked too, or the write
	// lock is the store's); passes them, with the transaction's time, to
	// merge; writes what merge returns as it is; deletes the pacing_peers
	// rows seen before that time less s.TTL; and commits. Either way it
	// returns every pacing row and the pacing_peers rows seen at or after
	// that time less s.TTL, read after the writes.
	PacingSync(ctx context.Context, s PacingSync, merge func(now time.Time, states []jobs.BackendPacing, peers []PeerRow) PacingWrite) ([]jobs.BackendPacing, []PeerRow, error)
}

// Tx is a store's write transaction, bound to the context WriteTx got.
// Each method is one statement (FileDelete and BatchInsert may take a
// few); times are the transaction's clock.
type Tx interface {
	// BatchGet reads a batch's row.
	BatchGet(p BatchGetParams) (jobs.Batch, error)
	// BatchInsert inserts a batch in status validating, expiring p.Window
	// after the transaction's time, only if its input file is the org's:
	// jobs.ErrNotFound when it is not.
	BatchInsert(p BatchInsertParams) (jobs.Batch, error)
	// BatchMove moves a batch from p.From to p.To when it is in p.From,
	// and returns it moved. jobs.ErrNotFound when no batch p.ID is in
	// p.From (whether there is one in another status, it does not say).
	BatchMove(p BatchMoveParams) (jobs.Batch, error)
	// BatchSetOutputs names a batch's output and error files and returns
	// the batch.
	BatchSetOutputs(p BatchSetOutputsParams) (jobs.Batch, error)
	// FileInsert inserts a file's row, of 0 bytes.
	FileInsert(p FileInsertParams) error
	// FileChunkInsert inserts one chunk of a file's content.
	FileChunkInsert(p FileChunkInsertParams) error
	// FileSetBytes sets a file's size and returns the file.
	FileSetBytes(p FileSetBytesParams) (jobs.File, error)
	// FileDelete deletes a file and its chunks.
	FileDelete(p FileGetParams) error

	// ReserveLock takes the locks of an org's and a token's ("": none)
	// reservations, held until the transaction ends: two transactions
	// that take the same one run one after the other.
	ReserveLock(org, token string) error
	// Now is the transaction's time.
	Now() time.Time
	// ReservationsExpire deletes the org's expired reservations.
	ReservationsExpire(org string) error
	// ReservationInsert inserts a reservation.
	ReservationInsert(p ReservationInsertParams) error
	// ReservedRead is DB.ReservedRead, in the transaction.
	ReservedRead(p jobs.ReservedParams) (jobs.Reserved, error)
	// UsageRead is jobs.Store.Usage (p normalized), in the transaction.
	UsageRead(p jobs.UsageParams) ([]jobs.UsageBucket, error)
}

// FileGetParams name a file.
type FileGetParams struct {
	ID string
	// OrgID, when set, names the file only if it is this org's.
	OrgID string
}

// FileChunkGetParams name chunk Seq (from 0) of a file's content.
type FileChunkGetParams struct {
	FileID string
	Seq    int
}

// BatchGetParams name a batch.
type BatchGetParams struct {
	ID string
	// OrgID, when set, names the batch only if it is this org's.
	OrgID string
	// ForUpdate (Tx only) locks the batch's row until the transaction
	// ends; on SQLite, a write transaction holds the whole database.
	ForUpdate bool
}

// BatchInsertParams are a new batch's row.
type BatchInsertParams struct {
	ID, OrgID, CreatedBy, TokenID, InputFileID, Endpoint, CompletionWindow string
	Metadata                                                               []byte
	Priority                                                               int
	// Window is the time from the batch's creation to its expiry.
	Window time.Duration
}

// BatchMoveParams are one conditional move of a batch (Tx.BatchMove): its
// status becomes To, and To's time column is stamped (batchdb.StampSet).
type BatchMoveParams struct {
	ID       string
	From, To jobs.BatchStatus
	// SetErrors says whether Errors (batchdb.EncodeErrors' form, nil for
	// none)
	// replaces the batch's errors.
	SetErrors bool
	Errors    []byte
	// Counts replace the stored counts when non-nil.
	Counts *jobs.BatchCounts
}

// BatchSetOutputsParams name a finished batch's files ("" for none).
type BatchSetOutputsParams struct {
	ID                        string
	OutputFileID, ErrorFileID string
}

// FileInsertParams are a new file's row, stamped with the transaction's
// time.
type FileInsertParams struct {
	ID, OrgID, CreatedBy, Purpose, Filename string
}

// FileChunkInsertParams are chunk Seq (from 0) of a file's content.
type FileChunkInsertParams struct {
	FileID string
	Seq    int
	Data   []byte
}

// FileSetBytesParams are a file's size, once its content is stored.
type FileSetBytesParams struct {
	ID    string
	Bytes int64
}

// TokenInsertParams are a new token's row.
type TokenInsertParams struct {
	ID, OrgID, UserID string
	Role              jobs.Role
	Hash              []byte
}
