package sdkcompat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/promptkit/promptkit/providertest"
)

// TestFrontDoorEmbeddings: the official Go SDK's Embeddings.New against
// `serve`'s front door: the provider's vectors in input order, dimensions
// passed on, a model named by profile or by backend model, token arrays
// refused naming the parameter, and the provider's 429 and 5xx answered
// at once (no job) with the statuses the SDK tells apart.
func TestFrontDoorEmbeddings(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	ctx := t.Context()

	texts := []string{"the cat sat", "on the mat"}
	res, err := cl.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:      "default",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		Dimensions: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || res.Model != "main-model" || res.Usage.PromptTokens != 6 || res.Usage.TotalTokens != 6 {
		t.Fatalf("answer %s", res.RawJSON())
	}
	for i, text := range texts {
		if d := res.Data[i]; d.Index != int64(i) || !reflect.DeepEqual(d.Embedding, providertest.EmbeddingFor(text, 8)) {
			t.Errorf("data[%d] %v", i, d.Embedding)
		}
	}
	if n := s.main.Count(); n != 1 {
		t.Errorf("the provider saw %d calls, want 1", n)
	}

	one, err := cl.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "main-model",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("alone")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Data) != 1 || !reflect.DeepEqual(one.Data[0].Embedding, providertest.EmbeddingFor("alone", 0)) {
		t.Errorf("one string by model name: %s", one.RawJSON())
	}

	status := func(t *testing.T, err error, want int) *openai.Error {
		t.Helper()
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != want {
			t.Fatalf("error %v, want *openai.Error with %d", err, want)
		}
		return e
	}
	_, err = cl.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "default",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1212, 318}},
	})
	if e := status(t, err, http.StatusBadRequest); e.Param != "input" || e.Type != "invalid_request_error" {
		t.Errorf("token array: param %q type %q", e.Param, e.Type)
	}

	// transient_retries is 0 in this service: each failure is the
	// provider's first answer.
	s.limited.Enqueue(providertest.Status(http.StatusTooManyRequests).WithRetryAfter("1"))
	_, err = cl.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "limited", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	e := status(t, err, http.StatusTooManyRequests)
	if ra, perr := strconv.Atoi(e.Response.Header.Get("Retry-After")); perr != nil || ra < 1 || e.Type != "rate_limit_error" {
		t.Errorf("429: Retry-After %q, type %q", e.Response.Header.Get("Retry-After"), e.Type)
	}
	s.broken.Enqueue(providertest.Status(http.StatusInternalServerError))
	_, err = cl.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "broken", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	if e := status(t, err, http.StatusBadGateway); e.Code != "provider_5xx" {
		t.Errorf("5xx: code %q", e.Code)
	}
}

// TestEmbeddings: providertest's fake answers the SDK's Embeddings.New
// with its deterministic vectors, and a scripted 429 comes back as the
// SDK's typed error with the fake's Retry-After.
func TestEmbeddings(t *testing.T) {
	t.Parallel()
	srv, cl := newClient(t)
	res, err := cl.Embeddings.New(t.Context(), openai.EmbeddingNewParams{
		Model:      openai.EmbeddingModelTextEmbedding3Small,
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b c"}},
		Dimensions: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || !reflect.DeepEqual(res.Data[1].Embedding, providertest.EmbeddingFor("b c", 3)) || res.Usage.PromptTokens != 3 {
		t.Fatalf("answer %s", res.RawJSON())
	}
	srv.Enqueue(providertest.Status(http.StatusTooManyRequests).WithRetryAfter("4"))
	_, err = cl.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests || e.Response.Header.Get("Retry-After") != "4" {
		t.Fatalf("error %v", err)
	}
}

// TestFrontDoorEmbeddingsBatch: a batch with endpoint /v1/embeddings
// through the SDK's Batches.New against `serve`: each line runs as a job
// and the output file holds one embeddings list per line, which the
// SDK's CreateEmbeddingResponse reads (vectors in input order, the
// dimensions asked, usage).
func TestFrontDoorEmbeddingsBatch(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	inputs := map[string][]string{"a": {"the cat sat", "on the mat"}, "b": {"alone"}}
	var in bytes.Buffer
	for _, id := range []string{"a", "b"} {
		line, err := json.Marshal(map[string]any{"custom_id": id, "method": "POST", "url": "/v1/embeddings",
			"body": map[string]any{"model": "default", "input": inputs[id], "dimensions": 8}})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	b := createBatchFor(t, cl, in.Bytes(), openai.BatchNewParamsEndpointV1Embeddings)
	b = waitBatch(t, cl, b.ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != 2 || b.ErrorFileID != "" {
		t.Fatalf("batch %s", b.RawJSON())
	}
	res, err := cl.Files.Content(t.Context(), b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	seen := 0
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int                            `json:"status_code"`
				Body       openai.CreateEmbeddingResponse `json:"body"`
			} `json:"response"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		seen++
		body := l.Response.Body
		want := inputs[l.CustomID]
		if l.Response.StatusCode != http.StatusOK || string(l.Error) != "null" || len(body.Data) != len(want) ||
			body.Model != "main-model" || body.Usage.PromptTokens == 0 || body.Usage.TotalTokens != body.Usage.PromptTokens {
			t.Fatalf("line %s: %s", l.CustomID, sc.Text())
		}
		for i, text := range want {
			if d := body.Data[i]; d.Index != int64(i) || !reflect.DeepEqual(d.Embedding, providertest.EmbeddingFor(text, 8)) {
				t.Errorf("line %s, vector %d: %+v", l.CustomID, i, d)
			}
		}
	}
	if err := sc.Err(); err != nil || seen != 2 {
		t.Fatalf("output file: %d lines, %v", seen, err)
	}
}
