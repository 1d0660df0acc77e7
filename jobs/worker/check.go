package worker

import (
	"context"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

// Check refuses at submission what a worker with this engine could not
// run: an unknown prompt or profile, inputs failing the prompt's schema, a
// backend that does not serve the model; for an embeddings prompt, what
// Engine.Embed would refuse before calling the backend (an engine whose
// injected client cannot embed, say). p must be normalized
// (jobs.EnqueueParams.Normalize): the submitter did that once, and the
// store's rules are not repeated here. It performs no I/O.
func Check(ctx context.Context, eng *promptkit.Engine, p jobs.EnqueueParams) error {
	if p.Embedding != nil {
		return eng.CheckEmbed(ctx, embedRequest(*p.Embedding, p.Profile, p.ExecutionOptions))
	}
	req, err := Request(jobs.Prompt{Text: p.Text, PromptRef: p.PromptRef, Inputs: p.Inputs, Chat: p.Chat, Profile: p.Profile}, p.ExecutionOptions)
	if err != nil {
		return err
	}
	_, err = eng.Prepare(ctx, req)
	return err
}
