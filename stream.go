package promptkit

import (
	"context"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/openai"
	"github.com/promptkit/promptkit/pktype"
)

// streamAttempts is a generation's attempt function that streams each
// call's answer to onDelta, numbering the pieces with gen and the
// attempt. The scheduler calls it once per dispatched attempt, in order
// and on the run's goroutine, so counting the calls numbers attempts as
// its execution events do.
func streamAttempts(f *openai.Frozen, gen uint64, onDelta func(StreamDelta)) func(context.Context) llm.Outcome {
	attempt := 0
	return func(ctx context.Context) llm.Outcome {
		attempt++
		n := attempt
		return f.ExecuteStream(ctx, func(d pktype.StreamDelta) {
			d.Generation, d.Attempt = int(gen), n
			onDelta(d)
		})
	}
}
