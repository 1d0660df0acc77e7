package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/providertest"
)

// answer is the provider's answer to the chat benchmark's request.
func answer(b *testing.B) json.RawMessage {
	prov := providertest.NewServer()
	defer prov.Close()
	res, err := http.Post(prov.URL+"/chat/completions", "application/json", strings.NewReader(
		`{"model":"fast-model","messages":[{"role":"user","content":"How far is the moon from the earth? (1)"}],"max_tokens":64}`))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkAnswerBody is what the store does to the backend's answer
// before it keeps it (responses.body).
func BenchmarkAnswerBody(b *testing.B) {
	body := answer(b)
	for b.Loop() {
		if _, err := jobs.AnswerBody(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompletion is the chat completion made from the kept body,
// as /v1/chat/completions writes it.
func BenchmarkCompletion(b *testing.B) {
	body, err := jobs.AnswerBody(answer(b))
	if err != nil {
		b.Fatal(err)
	}
	j := jobs.Job{ID: "01a251df-31a0-71b3-84b4-b4488a5de24a"}
	r := jobs.Response{Answer: jobs.Answer{Body: body, Output: "Fake provider reply: How far is the moon from the earth? (1)",
		Model: "fast-model", FinishReason: "stop"}, CreatedAt: time.Now()}
	for b.Loop() {
		if _, err := json.Marshal(openaiapi.CompletionJSON(j, r)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompletionNoBody is the chat completion of an answer without
// a kept body (an injected client's, or one stored before bodies were).
func BenchmarkCompletionNoBody(b *testing.B) {
	j := jobs.Job{ID: "01a251df-31a0-71b3-84b4-b4488a5de24a"}
	r := jobs.Response{Answer: jobs.Answer{Output: "Fake provider reply: How far is the moon from the earth? (1)", Model: "fast-model"},
		CreatedAt: time.Now()}
	for b.Loop() {
		if _, err := json.Marshal(openaiapi.CompletionJSON(j, r)); err != nil {
			b.Fatal(err)
		}
	}
}
