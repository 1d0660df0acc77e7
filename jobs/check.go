package jobs

import "context"

// CheckFunc refuses at submission what no worker could run, given params
// the submitter normalized (EnqueueParams.Normalize, the store's own
// rules): what the engine says about the request (worker.Check is the one
// the CLI wires). The server and the batch processor take the same one,
// so a request and a batch line are refused alike. Its error must not
// quote the request.
type CheckFunc func(ctx context.Context, p EnqueueParams) error
