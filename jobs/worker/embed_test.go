package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// An embeddings prompt runs through Engine.Embed on a worker: its inputs
// and dimensions go to the provider's embeddings route, and the job
// succeeds with the vectors as the response's parsed value, no text, the
// model and the usage. Its attempt is recorded as a run's is.
func TestEmbeddingPromptRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		e := f.enqueue(jobs.EnqueueParams{Embedding: &jobs.EmbeddingRequest{
			Input: []string{"hello there", "hi"}, Dimensions: ptr(4), EncodingFormat: "base64"}})
		w := f.worker("w1")
		f.runOnce(w, 1)

		j := f.job(e.JobID)
		if j.State != jobs.Succeeded {
			t.Fatalf("job: state=%s kind=%q msg=%q", j.State, j.ErrorKind, j.ErrorMessage)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]float64
		if err := json.Unmarshal(r.Parsed, &got); err != nil {
			t.Fatalf("parsed %s: %v", r.Parsed, err)
		}
		want := [][]float64{providertest.EmbeddingFor("hello there", 4), providertest.EmbeddingFor("hi", 4)}
		if r.Output != "" || !reflect.DeepEqual(got, want) || r.Model == "" {
			t.Fatalf("response: output %q, vectors %v, model %q; want %v", r.Output, got, r.Model, want)
		}
		if !r.Usage.Known.PromptTokens || r.Usage.PromptTokens != 3 || r.Usage.Known.CompletionTokens {
			t.Errorf("usage %+v, want 3 prompt tokens and no completion count", r.Usage)
		}
		reqs := f.srv.Requests()
		if len(reqs) != 1 || reqs[0].Path != "/v1/embeddings" {
			t.Fatalf("provider saw %d requests (%v)", len(reqs), reqs)
		}
		var body map[string]any
		if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		// The vectors are asked for as numbers: base64 is how the answer
		// is written, not what the provider sends.
		if !reflect.DeepEqual(body["input"], []any{"hello there", "hi"}) || body["dimensions"] != 4.0 || body["encoding_format"] != nil {
			t.Fatalf("provider got %s", reqs[0].Body)
		}
		evs, atts := f.events(e.JobID)
		if !eq(evs, []string{"→queued", "queued→running", "attempt:200", "running→succeeded"}) ||
			atts[0].Outcome != "success" || atts[0].Usage["prompt_tokens"].Value != 3 {
			t.Fatalf("events %v, attempts %+v", evs, atts)
		}
	})
}

// A 503 fails the embeddings job's attempt as a run's: it is retried
// after backoff, and the next attempt succeeds. Both attempts are
// recorded.
func TestEmbeddingPromptRetries(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.Enqueue(providertest.Status(503))
		e := f.enqueue(jobs.EnqueueParams{Embedding: &jobs.EmbeddingRequest{Input: []string{"secret text"}}})
		w := f.worker("w1")
		f.runOnce(w, 1)
		j := f.job(e.JobID)
		if j.State != jobs.Queued || j.ErrorKind != jobs.KindProvider5xx || strings.Contains(j.ErrorMessage, "secret") {
			t.Fatalf("after the 503: state=%s kind=%q msg=%q", j.State, j.ErrorKind, j.ErrorMessage)
		}
		f.clock.Advance(time.Hour) // past the backoff
		f.runOnce(w, 1)
		j = f.job(e.JobID)
		if j.State != jobs.Succeeded || j.Attempt != 2 {
			t.Fatalf("job: state=%s attempt=%d kind=%q msg=%q", j.State, j.Attempt, j.ErrorKind, j.ErrorMessage)
		}
		r, err := f.store.GetResponse(f.ctx, "", j.ResponseID)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal([][]float64{providertest.EmbeddingFor("secret text", 0)}); string(r.Parsed) != string(want) {
			t.Fatalf("parsed %s, want %s", r.Parsed, want)
		}
		evs, _ := f.events(e.JobID)
		if !eq(evs, []string{"→queued", "queued→running", "attempt:503", "running→queued", "queued→running", "attempt:200", "running→succeeded"}) {
			t.Fatalf("events %v", evs)
		}
	})
}

// Check admits an embeddings prompt an engine can run, resolving its
// model without calling the provider, and refuses what Embed would
// refuse: an unknown profile, an engine whose client cannot embed.
func TestCheckEmbedding(t *testing.T) {
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	eng := newEngine(t, srv.URL, 0)
	p := jobs.EnqueueParams{Embedding: &jobs.EmbeddingRequest{Input: []string{"a"}}}
	if err := worker.Check(context.Background(), eng, p); err != nil {
		t.Fatalf("Check: %v", err)
	}
	p.Profile = "nope"
	if err := worker.Check(context.Background(), eng, p); !errors.Is(err, promptkit.ErrProfileNotFound) {
		t.Fatalf("unknown profile: Check = %v", err)
	}
	gen, err := promptkit.New(promptkit.Config{LLMClient: generateOnly{},
		Profiles: []promptkit.Profile{{ID: "default", Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Profile = ""
	if err := worker.Check(context.Background(), gen, p); !errors.Is(err, promptkit.ErrInvalidRequest) {
		t.Fatalf("a client that cannot embed: Check = %v", err)
	}
	if srv.Count() != 0 {
		t.Fatalf("Check reached the provider: %d requests", srv.Count())
	}
	if _, err := worker.Request(jobs.Prompt{Embedding: p.Embedding}, jobs.ExecutionOptions{}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("Request of an embeddings prompt = %v, want ErrInvalid", err)
	}
}

// generateOnly is an injected client that cannot embed.
type generateOnly struct{}

func (generateOnly) Generate(context.Context, promptkit.GenerateRequest) (*promptkit.GenerateResponse, error) {
	return &promptkit.GenerateResponse{Text: "x"}, nil
}
