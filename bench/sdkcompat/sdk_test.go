// Package sdkcompat checks that providertest's fake provider works with the
// official OpenAI Go SDK, which promptkit's own module does not depend on:
// streams deliver chunks and usage, models list, and what the fake cannot
// honour comes back as the SDK's typed error.
package sdkcompat

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/promptkit/promptkit/providertest"
)

func newClient(t *testing.T, opts ...providertest.Option) (*providertest.Server, openai.Client) {
	t.Helper()
	srv := providertest.NewServer(opts...)
	t.Cleanup(srv.Close)
	cl := openai.NewClient(
		option.WithBaseURL(srv.URL+"/"),
		option.WithAPIKey("test-key"),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
	return srv, cl
}

func params(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

func TestStreamWithUsage(t *testing.T) {
	_, cl := newClient(t)
	p := params("tell me a story")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := cl.Chat.Completions.NewStreaming(context.Background(), p)
	defer stream.Close()

	var (
		acc           openai.ChatCompletionAccumulator
		contentChunks int
		usageChunks   int
	)
	for stream.Next() {
		c := stream.Current()
		if !acc.AddChunk(c) {
			t.Fatalf("accumulator refused chunk %s", c.RawJSON())
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			contentChunks++
		}
		if c.Usage.TotalTokens > 0 {
			usageChunks++
			if len(c.Choices) != 0 {
				t.Errorf("usage chunk has choices: %s", c.RawJSON())
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if contentChunks < 2 {
		t.Errorf("%d content chunks, want the reply in several", contentChunks)
	}
	if usageChunks != 1 {
		t.Errorf("%d usage chunks, want 1", usageChunks)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices accumulated", len(acc.Choices))
	}
	if got, want := acc.Choices[0].Message.Content, "Fake provider reply: tell me a story"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Model != "gpt-test" {
		t.Errorf("finish_reason %q model %q", acc.Choices[0].FinishReason, acc.Model)
	}
	// 4 prompt words, 7 reply words.
	if u := acc.Usage; u.PromptTokens != 4 || u.CompletionTokens != 7 || u.TotalTokens != 11 {
		t.Errorf("usage %+v, want 4 + 7 = 11", u)
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	srv, cl := newClient(t)
	srv.Enqueue(providertest.Reply("scripted words arrive one by one"))
	stream := cl.Chat.Completions.NewStreaming(context.Background(), params("hi"))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunks++
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 8 { // role, 6 words, finish
		t.Errorf("%d chunks, want 8", chunks)
	}
	if acc.Choices[0].Message.Content != "scripted words arrive one by one" || acc.Usage.TotalTokens != 0 {
		t.Errorf("content %q usage %+v, want the scripted text and no usage", acc.Choices[0].Message.Content, acc.Usage)
	}
}

// A scripted error status answers a stream with the JSON error, which the
// SDK reports as its typed error.
func TestStreamError(t *testing.T) {
	srv, cl := newClient(t)
	srv.Enqueue(providertest.Status(http.StatusTooManyRequests).WithRetryAfter("1"))
	stream := cl.Chat.Completions.NewStreaming(context.Background(), params("hi"))
	defer stream.Close()
	if stream.Next() {
		t.Fatalf("got chunk %s, want an error", stream.Current().RawJSON())
	}
	var apiErr *openai.Error
	if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "rate_limit_error" {
		t.Errorf("error %v, want a 429 rate_limit_error", stream.Err())
	}
}

func TestNonStreaming(t *testing.T) {
	_, cl := newClient(t)
	res, err := cl.Chat.Completions.New(context.Background(), params("say hi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != "Fake provider reply: say hi" || res.Usage.TotalTokens == 0 {
		t.Errorf("completion %s", res.RawJSON())
	}
}

func TestModels(t *testing.T) {
	_, cl := newClient(t, providertest.WithModel("gpt-test"), providertest.WithModels("org/local"))
	page, err := cl.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.OwnedBy == "" || m.Created == 0 {
			t.Errorf("model %s", m.RawJSON())
		}
	}
	if !slices.Equal(ids, []string{"gpt-test", "org/local"}) {
		t.Errorf("models %v", ids)
	}
	m, err := cl.Models.Get(context.Background(), "gpt-test")
	if err != nil || m.ID != "gpt-test" {
		t.Errorf("Get: %v %v", m, err)
	}
	_, err = cl.Models.Get(context.Background(), "missing")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("Get missing: %v, want a 404 model_not_found", err)
	}
}

// The fake answers n up to providertest.MaxChoices; more is a 400
// naming n, not an answer with fewer choices.
func TestUnsupportedRejected(t *testing.T) {
	_, cl := newClient(t)
	p := params("hi")
	p.N = openai.Int(providertest.MaxChoices + 1)
	_, err := cl.Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "n" || apiErr.Type != "invalid_request_error" {
		t.Fatalf("n=%d: %v, want a 400 invalid_request_error for param n", providertest.MaxChoices+1, err)
	}
}
