package worker

import (
	"context"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// Check refuses at submission what a worker with this engine could not
// run: what the store refuses (jobs.EnqueueParams.Normalize), then what
// the engine says about the request — an unknown prompt or profile,
// inputs failing the prompt's schema, a backend that does not serve the
// model. It performs no I/O.
func Check(ctx context.Context, eng *promptkit.Engine, p jobs.EnqueueParams) error {
	p, err := p.Normalize()
	if err != nil {
		return err
	}
	opts, err := jobs.ParseExecutionOptions(p.ExecutionOptions)
	if err != nil {
		return err
	}
	req, err := Request(jobs.Prompt{Text: p.Text, PromptRef: p.PromptRef, Inputs: p.Inputs, Chat: p.Chat, Profile: p.Profile}, opts)
	if err != nil {
		return err
	}
	_, err = eng.Prepare(ctx, req)
	return err
}
