package promptkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// secretInput is an input that must never appear in an error.
const secretInput = "SECRET-input-7f3a"

func TestEmbed(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	res, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"hello there", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{providertest.EmbeddingFor("hello there", 0), providertest.EmbeddingFor("hi", 0)}
	if !reflect.DeepEqual(res.Embeddings, want) || res.ProfileID != "default" || res.BackendID != "local" || res.Model != "m1" || res.Attempts != 1 || res.RunID == "" {
		t.Fatalf("result %+v", res)
	}
	// The provider reports prompt and total tokens; the completion count
	// does not exist for embeddings and stays unknown, not zero.
	u, _ := json.Marshal(res.Usage)
	if string(u) != `{"prompt_tokens":3,"completion_tokens":null,"total_tokens":3,"cached_tokens":null,"reasoning_tokens":null}` {
		t.Fatalf("usage %s", u)
	}
	req := r.srv.Requests()[0]
	var body map[string]any
	_ = json.Unmarshal(req.Body, &body)
	if req.Path != "/v1/embeddings" || !reflect.DeepEqual(body, map[string]any{"model": "m1", "input": []any{"hello there", "hi"}}) {
		t.Fatalf("sent %s %s", req.Path, req.Body)
	}
}

// TestEmbedDimensionsAndBase64: dimensions are sent and honoured; a base64
// answer is decoded to the same floats a float answer holds.
func TestEmbedDimensionsAndBase64(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	for _, enc := range []string{"", promptkit.EncodingFloat, promptkit.EncodingBase64} {
		res, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"x"}, Dimensions: new(5), EncodingFormat: enc})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Embeddings, [][]float64{providertest.EmbeddingFor("x", 5)}) {
			t.Fatalf("%q: %v", enc, res.Embeddings)
		}
	}
	got := r.srv.Requests()[2].Body
	if !strings.Contains(string(got), `"dimensions":5`) || !strings.Contains(string(got), `"encoding_format":"base64"`) {
		t.Fatalf("sent %s", got)
	}
	// An answer of another length than asked for is malformed.
	r.srv.Enqueue(providertest.Response{Body: []byte(`{"data":[{"embedding":[1,0]}]}`)})
	_, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"x"}, Dimensions: new(5)})
	if !errors.Is(err, promptkit.ErrMalformedResponse) || !errors.Is(err, promptkit.ErrLLMGenerate) {
		t.Fatalf("err %v", err)
	}
}

// TestEmbedRetriesWithRetryAfter: a 429 waits its Retry-After, a 503 the
// backoff, both through the engine's wait seam, and the events are a
// run's: one generation of three attempts with two retry delays.
func TestEmbedRetriesWithRetryAfter(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	r.srv.Enqueue(providertest.Status(429).WithRetryAfter("7"), providertest.Status(503))
	var log eventLog
	res, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"x"}, Observer: log.Observe})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 3 || r.srv.Count() != 3 {
		t.Fatalf("attempts %d, provider calls %d", res.Attempts, r.srv.Count())
	}
	// 7 s for the 429 (its Retry-After, over the 500 ms backoff), then the
	// second backoff, 1 s: a 503 without Retry-After.
	if w := r.clock.Waits(); !reflect.DeepEqual(w, []time.Duration{7 * time.Second, time.Second}) {
		t.Fatalf("waits %v", w)
	}
	evs := log.Events()
	if got := eventKinds(evs); got != "started,attempt,retry_delay,attempt,retry_delay,attempt,finished" {
		t.Fatalf("events %s", got)
	}
	if evs[1].StatusCode != 429 || evs[1].Generation != 1 || evs[3].StatusCode != 503 || evs[5].StatusCode != 200 || evs[5].Attempt != 3 {
		t.Fatalf("attempt events %+v %+v %+v", evs[1], evs[3], evs[5])
	}
	fin := lastEvent(t, evs)
	if fin.Outcome != promptkit.ExecutionOutcomeSuccess || fin.Attempts != 3 || fin.TransientRetries != 2 || fin.RunID != res.RunID ||
		fin.ProfileID != "default" || fin.BackendID != "local" || fin.Model != "m1" || fin.PromptID != "" {
		t.Fatalf("finished %+v", fin)
	}
	// Only the answering attempt reported usage: known, but incomplete.
	if u := fin.Usage.PromptTokens; u.Value != 1 || !u.Known || u.Complete {
		t.Fatalf("finished usage %+v", fin.Usage)
	}
}

func TestEmbedRetriesExhausted(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(1)})
	r.srv.Enqueue(providertest.Status(503), providertest.Status(503).WithRetryAfter("2"))
	var log eventLog
	res, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{secretInput}, Observer: log.Observe})
	if res != nil || !errors.Is(err, promptkit.ErrRetriesExhausted) || !errors.Is(err, promptkit.ErrLLMGenerate) {
		t.Fatalf("res %v, err %v", res, err)
	}
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 503 || ge.BackendID() != "local" {
		t.Fatalf("GenerationError %#v", ge)
	}
	if nb, ok := promptkit.NotBefore(err); !ok || nb.IsZero() {
		t.Fatalf("NotBefore %v %v", nb, ok)
	}
	if strings.Contains(err.Error(), secretInput) || !strings.Contains(err.Error(), "embedding") {
		t.Fatalf("error text %q", err)
	}
	fin := lastEvent(t, log.Events())
	if fin.Outcome != promptkit.ExecutionOutcomeError || fin.Failure != promptkit.ExecutionFailureProviderStatus || !fin.RetriesExhausted || fin.StatusCode != 503 {
		t.Fatalf("finished %+v", fin)
	}
}

// TestEmbedSharesTheBackendsGate: an embedding's 429 pauses the backend
// for a run that follows (and the other way round), and teaches the
// backend's pacing: one gate per backend, whatever the call.
func TestEmbedSharesTheBackendsGate(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{retries: intp(0)})
	// Two answers, then a 429, at one instant of the frozen clock.
	r.srv.Enqueue(providertest.Reply(""), providertest.Reply(""), providertest.Status(429).WithRetryAfter("7"))
	var err error
	for range 3 {
		_, err = r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"x"}})
	}
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 429 {
		t.Fatalf("err %v", err)
	}
	if p := r.eng.Pacing()["local"]; p.Source != promptkit.Pacing429 {
		t.Fatalf("pacing after the embedding's 429: %+v", p)
	}
	if _, err := r.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if w := r.clock.Waits(); len(w) == 0 || w[0] != 7*time.Second {
		t.Fatalf("the run did not wait out the pause: %v", w)
	}
	if c := r.srv.Count(); c != 4 {
		t.Fatalf("provider calls %d", c)
	}

	r2 := newSeamRig(t, seamOpts{retries: intp(0)})
	r2.srv.Enqueue(providertest.Status(429).WithRetryAfter("4"))
	if _, err := r2.eng.Run(context.Background(), promptkit.RunRequest{Text: "x"}); err == nil {
		t.Fatal("the run's 429 did not fail it")
	}
	if _, err := r2.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if w := r2.clock.Waits(); len(w) == 0 || w[0] != 4*time.Second {
		t.Fatalf("the embedding did not wait out the pause: %v", w)
	}
}

// TestEmbedSharesMaxActive: with one permit, an embedding waits while a
// run is in flight, and goes once it answers.
func TestEmbedSharesMaxActive(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{maxActive: 1})
	hold := make(chan struct{})
	r.srv.Enqueue(providertest.Response{Hold: hold, Text: "held"})
	ctx := deadlockGuard(t)
	ran := make(chan error, 1)
	go func() {
		_, err := r.eng.Run(ctx, promptkit.RunRequest{Text: "x"})
		ran <- err
	}()
	if err := r.srv.WaitArrivals(ctx, 1); err != nil {
		t.Fatal(err)
	}
	embedded := make(chan error, 1)
	go func() {
		_, err := r.eng.Embed(ctx, promptkit.EmbedRequest{Input: []string{"x"}})
		embedded <- err
	}()
	// A sanity check only (the pause test above proves the shared gate
	// deterministically): an embedding that skipped the permit would
	// usually arrive while the run is held, and show as MaxInFlight 2.
	close(hold)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := <-embedded; err != nil {
		t.Fatal(err)
	}
	if got := r.srv.MaxInFlight(); got != 1 {
		t.Fatalf("provider saw %d requests in flight, want 1", got)
	}
}

func TestEmbedRefusals(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	for _, c := range []struct {
		name string
		req  promptkit.EmbedRequest
		want error
	}{
		{"no input", promptkit.EmbedRequest{}, promptkit.ErrInvalidRequest},
		{"empty input", promptkit.EmbedRequest{Input: []string{"a", ""}}, promptkit.ErrInvalidRequest},
		{"too many", promptkit.EmbedRequest{Input: make([]string, promptkit.MaxEmbeddingInputs+1)}, promptkit.ErrInvalidRequest},
		{"zero dimensions", promptkit.EmbedRequest{Input: []string{"a"}, Dimensions: new(0)}, promptkit.ErrInvalidRequest},
		{"encoding", promptkit.EmbedRequest{Input: []string{"a"}, EncodingFormat: "int8"}, promptkit.ErrInvalidRequest},
		{"negative retries", promptkit.EmbedRequest{Input: []string{"a"}, TransientRetries: intp(-1)}, promptkit.ErrInvalidRequest},
		{"unknown profile", promptkit.EmbedRequest{Input: []string{"a"}, ProfileID: "nope"}, promptkit.ErrProfileNotFound},
		{"backend without the model", promptkit.EmbedRequest{Input: []string{"a"}, Backend: "local", Model: "other"}, promptkit.ErrInvalidRequest},
	} {
		// CheckEmbed refuses what Embed refuses, as Embed would.
		if err := r.eng.CheckEmbed(context.Background(), c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: CheckEmbed %v, want %v", c.name, err, c.want)
		}
		var log eventLog
		c.req.Observer = log.Observe
		res, err := r.eng.Embed(context.Background(), c.req)
		if res != nil || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
			continue
		}
		if got := eventKinds(log.Events()); got != "started,finished" {
			t.Errorf("%s: events %s", c.name, got)
		}
	}
	if r.srv.Count() != 0 {
		t.Fatalf("refused requests reached the provider: %d", r.srv.Count())
	}
	if _, err := (*promptkit.Engine)(nil).Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a"}}); !errors.Is(err, promptkit.ErrInvalidConfig) {
		t.Fatalf("nil engine: %v", err)
	}
	if err := r.eng.CheckEmbed(context.Background(), promptkit.EmbedRequest{Input: []string{"a"}, Model: "m1", Backend: "local"}); err != nil {
		t.Fatalf("CheckEmbed: %v", err)
	}
	if r.srv.Count() != 0 {
		t.Fatalf("CheckEmbed reached the provider: %d", r.srv.Count())
	}
	// The model override goes to the provider; the model a profile uses
	// on a backend may be named with it.
	if _, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a"}, Model: "m1", Backend: "local"}); err != nil {
		t.Fatal(err)
	}
}

// TestEmbedMissingCredential: the key is read when the call starts, and
// its absence is the same error Run gives.
func TestEmbedMissingCredential(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{apiKeyEnv: "PROMPTKIT_TEST_EMBED_KEY_UNSET"})
	_, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a"}})
	if !errors.Is(err, promptkit.ErrMissingCredential) || r.srv.Count() != 0 {
		t.Fatalf("err %v", err)
	}
}

// generateOnly is an injected client that cannot embed.
type generateOnly struct{}

func (generateOnly) Generate(context.Context, promptkit.GenerateRequest) (*promptkit.GenerateResponse, error) {
	return &promptkit.GenerateResponse{Text: "x"}, nil
}

// embedClient embeds with a script of answers, one per call.
type embedClient struct {
	generateOnly
	calls   int
	answers []func(promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error)
}

func (c *embedClient) Embed(_ context.Context, req promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error) {
	c.calls++
	return c.answers[c.calls-1](req)
}

func TestEmbedInjectedClient(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{client: generateOnly{}})
	if _, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a"}}); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("a client without Embed: %v", err)
	}

	own := errors.New("my client failed")
	c := &embedClient{answers: []func(promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error){
		func(req promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error) {
			if req.Model != "m1" || req.BackendID != "local" || len(req.Input) != 2 {
				t.Errorf("request %+v", req)
			}
			return &promptkit.EmbeddingResponse{Vectors: [][]float64{{1}, {2}}, Usage: promptkit.TokenUsage{PromptTokens: 2}}, nil
		},
		func(promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error) { return nil, own },
		func(promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error) {
			return &promptkit.EmbeddingResponse{Vectors: [][]float64{{1}}}, nil
		},
		func(promptkit.EmbeddingRequest) (*promptkit.EmbeddingResponse, error) { return nil, nil },
	}}
	r = newSeamRig(t, seamOpts{client: c})
	res, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a", "b"}})
	if err != nil || !reflect.DeepEqual(res.Embeddings, [][]float64{{1}, {2}}) || !res.Usage.Known.PromptTokens || res.Usage.Known.TotalTokens {
		t.Fatalf("res %+v, err %v", res, err)
	}
	// The client's own error, not retried (it owns its retries).
	if _, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a"}}); !errors.Is(err, own) || !errors.Is(err, promptkit.ErrLLMGenerate) || c.calls != 2 {
		t.Fatalf("client error: %v after %d calls", err, c.calls)
	}
	for _, what := range []string{"a vector short", "nil answer"} {
		if _, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: []string{"a", "b"}}); !errors.Is(err, promptkit.ErrMalformedResponse) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// TestEmbedCopiesTheInput: the caller's slice may change while the call
// runs (here: before a retry); what is sent does not.
func TestEmbedCopiesTheInput(t *testing.T) {
	t.Parallel()
	r := newSeamRig(t, seamOpts{})
	in := []string{"before"}
	r.srv.Enqueue(providertest.Status(503))
	r.clock.OnWait(func(context.Context, time.Duration) error {
		in[0] = "after"
		return nil
	})
	res, err := r.eng.Embed(context.Background(), promptkit.EmbedRequest{Input: in})
	if err != nil || !reflect.DeepEqual(res.Embeddings[0], providertest.EmbeddingFor("before", 0)) {
		t.Fatalf("res %+v, err %v", res, err)
	}
}
