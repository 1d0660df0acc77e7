package promptkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
	"github.com/promptkit/promptkit/internal/openai"
	"github.com/promptkit/promptkit/pktype"
)

// Embedding requests and responses are pktype's.
type (
	EmbeddingRequest  = pktype.EmbeddingRequest
	EmbeddingResponse = pktype.EmbeddingResponse
)

// Embedding encodings (EmbedRequest.EncodingFormat) and the input limit.
const (
	EncodingFloat      = pktype.EncodingFloat
	EncodingBase64     = pktype.EncodingBase64
	MaxEmbeddingInputs = pktype.MaxEmbeddingInputs
)

// Embedder computes embeddings. An injected Config.LLMClient that also
// implements it serves Embed, once per attempt and never retried by the
// engine, as its Generate is; an injected client that does not makes Embed
// fail with ErrInvalidRequest. A nil response with a nil error is a
// malformed response.
type Embedder interface {
	Embed(ctx context.Context, req EmbeddingRequest) (*EmbeddingResponse, error)
}

// EmbedRequest asks for the embeddings of one or more texts.
type EmbedRequest struct {
	// Input holds the texts, one vector each: at least one and at most
	// MaxEmbeddingInputs, none empty. One text is a one-element slice.
	Input []string `json:"input"`
	// ProfileID, Model and Backend select what runs it exactly as they do
	// for RunRequest: the profile (default Config.DefaultProfile), a model
	// overriding the profile's, and another backend that serves that
	// model. The profile's sampling, system text and prompts do not apply.
	ProfileID string `json:"profile_id,omitempty"`
	Model     string `json:"model,omitempty"`
	Backend   string `json:"backend,omitempty"`
	// Dimensions, when set (positive), asks for vectors of that length;
	// an answer with another length is ErrMalformedResponse, since a
	// caller that asks usually stores them where the length is fixed.
	Dimensions *int `json:"dimensions,omitempty"`
	// EncodingFormat is how the provider is asked to send the vectors: ""
	// (not sent: JSON numbers), EncodingFloat, or EncodingBase64 (about a
	// quarter of the bytes; the server must support it). It changes only
	// the wire: EmbedResult.Embeddings holds float64 values either way,
	// base64 answers decoded from their float32 values.
	EncodingFormat string `json:"encoding_format,omitempty"`
	// TransientRetries, Observer, NoWaitPastDeadline and BeforeCall work
	// as they do in RunRequest: the call is one generation of attempts
	// (Generation 1 in the events), retried on 429 and 5xx after
	// Retry-After or backoff.
	TransientRetries   *int              `json:"transient_retries,omitempty"`
	Observer           ExecutionObserver `json:"-"`
	NoWaitPastDeadline bool              `json:"no_wait_past_deadline,omitempty"`
	BeforeCall         BeforeCallFunc    `json:"-"`
}

// EmbedResult is a completed embedding call.
type EmbedResult struct {
	// RunID identifies the call in its events, as a run's does.
	RunID     string `json:"run_id"`
	ProfileID string `json:"profile_id"`
	// BackendID is the backend that answered: with a model group, the
	// one the last attempt chose.
	BackendID string `json:"backend_id,omitempty"`
	// Model is the model the provider reported, else the one requested.
	Model string `json:"model"`
	// Embeddings holds one vector per input, in input order, all of one
	// length.
	Embeddings [][]float64 `json:"embeddings"`
	// Usage sums what the provider reported over the dispatched attempts:
	// for embeddings, prompt_tokens and total_tokens at most. A count it
	// did not report is unknown (null in JSON), not zero.
	Usage Usage `json:"usage"`
	// Cost is what the calls cost by Config.Prices (input tokens only):
	// see RunResult.Cost.
	Cost Cost `json:"cost_usd"`
	// Attempts counts provider calls actually made.
	Attempts int     `json:"attempts"`
	Timings  Timings `json:"timings"`
}

// Embed computes the embeddings of req.Input with the model req selects
// (resolved as Run resolves it) through POST {base_url}/embeddings. The
// call goes through the same gate as Run's generations: admission
// (MaxConcurrentRuns), the backend's pause, pacing (configured and
// learned) and MaxActive permits, with transient retries on 429 and 5xx
// that honour Retry-After, and a 429's Retry-After pausing the backend
// for every caller. Errors match the same sentinels as Run's and carry
// neither the inputs nor provider text; req.Observer receives the same
// events (started, attempt, retry_delay, finished).
func (e *Engine) Embed(ctx context.Context, req EmbedRequest) (*EmbedResult, error) {
	rec, err := e.begin(req.Observer)
	if err != nil {
		return nil, err
	}
	p, err := e.resolveEmbed(req)
	if err != nil {
		return nil, finish(rec, nil, err)
	}
	rec.SetIdentity(observe.Identity{ProfileID: p.profile.ID, BackendID: p.request.BackendID, Model: p.request.Model,
		Price: e.prices[p.request.Model], Embedding: true})
	res, err := e.embed(ctx, p, rec)
	return res, finish(rec, nil, err)
}

// CheckEmbed resolves req as Embed would (its profile, model and backend,
// and its own rules) without calling the backend, returning the error
// Embed would return before any attempt. It performs no I/O.
func (e *Engine) CheckEmbed(ctx context.Context, req EmbedRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := e.resolveEmbed(req)
	return err
}

// embedPlan is a resolved embedding call.
type embedPlan struct {
	profile Profile
	backend *backendRuntime // nil when an injected client runs without backends, or for a group
	group   []member        // a model group's backends; nil when one backend runs it
	request EmbeddingRequest
	retries uint64
	noWait  bool
	// beforeCall is EmbedRequest.BeforeCall.
	beforeCall BeforeCallFunc
}

func (e *Engine) resolveEmbed(req EmbedRequest) (*embedPlan, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil engine", ErrInvalidConfig)
	}
	if err := checkEmbed(req); err != nil {
		return nil, err
	}
	if e.client != nil {
		if _, ok := e.client.(Embedder); !ok {
			return nil, fmt.Errorf("%w: the injected LLMClient does not implement Embedder", ErrInvalidRequest)
		}
	}
	profile, model, backendID, group, err := e.target(req.ProfileID, req.Model, req.Backend)
	if err != nil {
		return nil, err
	}
	p := &embedPlan{profile: profile, group: group, retries: e.retryBudget(req.TransientRetries), noWait: req.NoWaitPastDeadline,
		beforeCall: req.BeforeCall}
	if backendID != "" {
		p.backend = e.backends[backendID]
	}
	// The plan keeps its own copy: the caller's slice may change.
	p.request = EmbeddingRequest{
		BackendID:      backendID,
		Model:          model,
		Input:          append([]string(nil), req.Input...),
		Dimensions:     clonePtr(req.Dimensions),
		EncodingFormat: req.EncodingFormat,
	}
	return p, nil
}

// checkEmbed checks a request on its own. Messages name fields and
// indexes, never inputs.
func checkEmbed(req EmbedRequest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
	switch {
	case len(req.Input) == 0:
		return bad("Input must hold at least one text")
	case len(req.Input) > MaxEmbeddingInputs:
		return bad("Input holds %d texts, more than %d", len(req.Input), MaxEmbeddingInputs)
	case req.Dimensions != nil && *req.Dimensions < 1:
		return bad("Dimensions must be positive")
	case req.EncodingFormat != "" && req.EncodingFormat != EncodingFloat && req.EncodingFormat != EncodingBase64:
		return bad("EncodingFormat must be %q or %q", EncodingFloat, EncodingBase64)
	case req.TransientRetries != nil && *req.TransientRetries < 0:
		return bad("TransientRetries must not be negative")
	}
	for i, s := range req.Input {
		if s == "" {
			return bad("Input[%d] is empty", i)
		}
	}
	return nil
}

// embedding prepares req's attempt on backend b (nil with an injected
// client).
func (e *Engine) embedding(b *backendRuntime, req EmbeddingRequest) (func(context.Context) llm.Outcome, error) {
	if e.client != nil {
		emb := e.client.(Embedder) // checked by resolveEmbed
		return func(ctx context.Context) llm.Outcome { return callEmbedder(ctx, emb, cloneEmbedding(req)) }, nil
	}
	frozen, err := openai.PrepareEmbedding(b.endpoint, req)
	if err != nil {
		return nil, &opError{op: fmt.Sprintf("backend %q", b.ID), cause: err}
	}
	return frozen.Execute, nil
}

// embed runs a resolved call under admission, as execute runs a plan:
// one sequence of attempts through the scheduler (dispatch.Generate), the
// same loop, gate and recording as a generation's.
func (e *Engine) embed(ctx context.Context, p *embedPlan, rec *observe.Recorder) (*EmbedResult, error) {
	release, admissionWait, err := e.sched.Admit(ctx)
	if err != nil {
		return nil, err
	}
	defer release()

	req := p.request
	est := embedEstimate(req, e.prices[req.Model])
	seq := dispatch.Sequence{Backend: req.BackendID, Generation: 1, Tokens: est.Tokens, NoWaitPastDeadline: p.noWait, Recorder: rec,
		Before: before(p.beforeCall, est)}
	if e.client == nil {
		seq.Retries = p.retries // injected clients own their retries
	}
	// A model group routes each attempt, as a generation's does.
	models := map[string]string{req.BackendID: req.Model}
	if len(p.group) == 0 {
		if seq.Attempt, err = e.embedding(p.backend, req); err != nil {
			return nil, err
		}
	} else {
		seq.Group = "profile:" + p.profile.ID
		for _, m := range p.group {
			r := req
			r.BackendID, r.Model = m.backend, m.model
			models[m.backend] = m.model
			attempt, err := e.embedding(e.backends[m.backend], r)
			if err != nil {
				return nil, err
			}
			seq.Routes = append(seq.Routes, dispatch.Route{Backend: m.backend, Weight: m.weight, Fallback: m.fallback, Attempt: attempt})
		}
	}
	out := e.sched.Generate(ctx, seq)
	if out.Err != nil {
		return nil, &opError{op: fmt.Sprintf("profile %q: embedding", p.profile.ID), cause: out.Err}
	}
	res := &EmbedResult{
		RunID:      rec.RunID(),
		ProfileID:  p.profile.ID,
		BackendID:  out.Backend,
		Model:      models[out.Backend],
		Embeddings: out.Embedding.Vectors,
	}
	if out.Embedding.Model != "" {
		res.Model = out.Embedding.Model
	}
	t := rec.Totals()
	res.Usage = Usage{TokenUsage: t.Usage, Known: rec.ObservedUsage().Usage().Known}
	res.Cost = t.Cost
	res.Attempts = int(t.Attempts)
	res.Timings = Timings{
		Admission:    admissionWait,
		CapacityWait: t.CapacityWait,
		Generation:   t.Generation,
		Total:        e.now().Sub(rec.Start()),
	}
	return res, nil
}

// callEmbedder performs one attempt with the injected client, checking
// its answer as the wire decoder checks a provider's.
func callEmbedder(ctx context.Context, emb Embedder, req EmbeddingRequest) llm.Outcome {
	resp, err := emb.Embed(ctx, req)
	if err != nil {
		return llm.Outcome{Err: &injectedError{cause: err}}
	}
	if resp == nil {
		return llm.Outcome{Err: &llm.AttemptError{Kind: ErrMalformedResponse, Cause: errors.New("injected client returned a nil response")}}
	}
	out := llm.Outcome{Usage: resp.Usage, Presence: resp.Presence()}
	if err := checkVectors(resp.Vectors, len(req.Input), req.Dimensions); err != nil {
		out.Err = &llm.AttemptError{Kind: ErrMalformedResponse, Cause: err}
		return out
	}
	out.Embedding = resp
	return out
}

// checkVectors holds an injected client to what the wire decoder demands:
// one non-empty vector per input, all of one length (dims, when asked).
func checkVectors(vs [][]float64, inputs int, dims *int) error {
	if len(vs) != inputs {
		return fmt.Errorf("injected client returned %d vectors for %d inputs", len(vs), inputs)
	}
	for _, v := range vs {
		if len(v) == 0 || len(v) != len(vs[0]) || dims != nil && len(v) != *dims {
			return errors.New("injected client returned vectors that are empty, of different lengths or not of the dimensions asked for")
		}
	}
	return nil
}

func cloneEmbedding(r EmbeddingRequest) EmbeddingRequest {
	r.Input = append([]string(nil), r.Input...)
	r.Dimensions = clonePtr(r.Dimensions)
	return r
}

// embedTokens is a rough cost for tokens-per-minute pacing and budgets,
// as promptTokens is for a generation: about four bytes per token.
func embedTokens(r EmbeddingRequest) int {
	n := 0
	for _, s := range r.Input {
		n += len(s)
	}
	return max(n/4, 1)
}
