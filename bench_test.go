package promptkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// benchEngine returns an engine on a providertest server and a request
// for its one prompt.
func benchEngine(b *testing.B) (*promptkit.Engine, promptkit.RunRequest) {
	b.Helper()
	srv := providertest.NewServer(providertest.WithMaxRecorded(1))
	b.Cleanup(srv.Close)
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "local", BaseURL: srv.URL, MaxActive: 4}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "local", Model: "m"}},
		Prompts:  []promptkit.Prompt{{ID: "greet", Template: "Say hello to {{.name}}."}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return eng, promptkit.RunRequest{PromptID: "greet", Inputs: map[string]any{"name": "Ada"}}
}

// BenchmarkRun measures one Engine.Run against providertest: rendering,
// scheduling, one HTTP exchange, strict decoding and accounting.
// Compare with BenchmarkBareHTTP from the same run (BENCHMARKS.md).
func BenchmarkRun(b *testing.B) {
	eng, req := benchEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Run(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunObserved is BenchmarkRun with a trivial observer, so the
// cost of building and delivering execution events shows up as the
// difference between the two (BENCHMARKS.md).
func BenchmarkRunObserved(b *testing.B) {
	eng, req := benchEngine(b)
	// Events arrive on the calling goroutine, so a plain counter is safe.
	events, runs := 0, 0
	req.Observer = func(promptkit.ExecutionEvent) { events++ }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Run(ctx, req); err != nil {
			b.Fatal(err)
		}
		runs++
	}
	// started, one attempt, finished: a cheaper path would be a bug.
	if events != 3*runs {
		b.Fatalf("observed %d events in %d runs, want %d", events, runs, 3*runs)
	}
}

// BenchmarkBareHTTP is the floor: the same request posted with net/http and
// the reply decoded into a small struct, no engine.
func BenchmarkBareHTTP(b *testing.B) {
	srv := providertest.NewServer(providertest.WithMaxRecorded(1))
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{
		"model":    "m",
		"messages": []map[string]string{{"role": "user", "content": "Say hello to Ada."}},
	})
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(srv.URL+"/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || len(out.Choices) == 0 {
			b.Fatal("bad reply", err)
		}
	}
}
