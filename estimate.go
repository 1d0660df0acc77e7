package promptkit

import "context"

// BeforeCallFunc is called before each provider call with its estimate;
// an error ends the run and no call is made (see RunRequest.BeforeCall).
type BeforeCallFunc func(ctx context.Context, est CallEstimate) error

// callEstimate estimates a generation's call, priced at price (the
// requested model's, as its attempts are; nil: none).
func callEstimate(r GenerateRequest, price *Price) CallEstimate {
	prompt := promptTokens(r)
	limit := r.OutputLimit()
	if limit == nil {
		return CallEstimate{Tokens: max(prompt, 1)}
	}
	out := *limit * r.Choices()
	est := CallEstimate{Tokens: max(prompt+out, 1)}
	if price != nil {
		est.Cost = price.Cost(TokenUsage{PromptTokens: prompt, CompletionTokens: out},
			TokenUsagePresence{PromptTokens: true, CompletionTokens: true}, false)
	}
	return est
}

// promptTokens estimates a request's prompt tokens: a quarter of its
// bytes.
func promptTokens(r GenerateRequest) int {
	n := 0
	for _, m := range r.Messages {
		n += max(len(m.Content), len(m.Parts))
		for _, c := range m.ToolCalls {
			n += len(c.Function.Arguments)
		}
	}
	for _, t := range r.Tools {
		if d := t.Function.Description; d != nil {
			n += len(*d)
		}
		n += len(t.Function.Parameters)
	}
	return n / 4
}

// embedEstimate estimates an embedding call, priced at price (nil: none).
func embedEstimate(r EmbeddingRequest, price *Price) CallEstimate {
	est := CallEstimate{Tokens: embedTokens(r)}
	if price != nil {
		est.Cost = price.Cost(TokenUsage{PromptTokens: est.Tokens}, TokenUsagePresence{PromptTokens: true}, true)
	}
	return est
}

// before is the dispatch hook of a call estimated est: f with it, or nil.
func before(f BeforeCallFunc, est CallEstimate) func(context.Context) error {
	if f == nil {
		return nil
	}
	return func(ctx context.Context) error { return f(ctx, est) }
}
