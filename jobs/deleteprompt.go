package jobs

import "fmt"

// ErrPromptActive is DeletePrompt's refusal of a prompt with a queued or
// running job: the job would run on without the prompt it answers. It
// matches ErrIllegalTransition (the prompt cannot go yet), so stores and
// their health tracking take it for a refusal, not a database failure.
var ErrPromptActive = fmt.Errorf("%w: the prompt has a queued or running job", ErrIllegalTransition)
