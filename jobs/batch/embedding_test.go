package batch_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/batch"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// An embeddings batch runs end to end: its lines are validated against
// the endpoint, enqueued as embeddings prompts, run by a worker through
// Engine.Embed, and the output file holds one embeddings list per line,
// with numbers or base64 as the line asked and the provider's usage. A
// chat line in it is a url_mismatch.
func TestEmbeddingsBatch(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		srv := providertest.NewServer()
		t.Cleanup(srv.Close)
		ctx := context.Background()
		in := `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"emb","input":["hello there","hi"]}}
{"custom_id":"b","method":"POST","url":"/v1/embeddings","body":{"model":"emb","input":"x","dimensions":3,"encoding_format":"base64"}}
`
		b := e.createEndpoint(openaiapi.EndpointEmbeddings, in)
		resolveEmb := func(model string) (jobs.Target, bool) {
			return jobs.Target{Profile: enginekit.ProfileID}, model == "emb"
		}
		p := e.processor(e.st, func(c *batch.Config) { c.Resolve = resolveEmb })
		step(t, p)
		e.wantStatus(b.ID, jobs.BatchInProgress)

		w, err := worker.New(worker.Config{Store: e.st, Engine: enginekit.Provider(t, srv.URL, enginekit.Retries(0)),
			Name: "w1", Concurrency: 1, HeartbeatInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if n, err := w.RunOnce(ctx); n != 1 || err != nil {
				t.Fatalf("RunOnce = %d, %v", n, err)
			}
		}
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchCompleted)
		if got.ErrorFileID != "" || got.Counts.Completed != 2 {
			t.Fatalf("batch %+v", got)
		}
		var buf bytes.Buffer
		if err := e.st.ReadFile(ctx, "acme", got.OutputFileID, &buf); err != nil {
			t.Fatal(err)
		}
		out := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if len(out) != 2 {
			t.Fatalf("output file has %d lines: %s", len(out), buf.String())
		}
		type body struct {
			Object string `json:"object"`
			Data   []struct {
				Object    string          `json:"object"`
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Model string `json:"model"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			} `json:"usage"`
		}
		type outLine struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int  `json:"status_code"`
				Body       body `json:"body"`
			} `json:"response"`
			Error any `json:"error"`
		}
		var lines []outLine
		for _, l := range out {
			var v outLine
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %s: %v", l, err)
			}
			lines = append(lines, v)
		}
		byID := map[string]body{}
		for _, l := range lines {
			if l.Response.StatusCode != 200 || l.Error != nil || l.Response.Body.Object != "list" || l.Response.Body.Model == "" {
				t.Fatalf("line %+v", l)
			}
			byID[l.CustomID] = l.Response.Body
		}
		a := byID["a"]
		if len(a.Data) != 2 || a.Usage == nil || a.Usage.PromptTokens != 3 || a.Usage.TotalTokens != 3 {
			t.Fatalf("line a: %+v", a)
		}
		for i, text := range []string{"hello there", "hi"} {
			var v []float64
			if err := json.Unmarshal(a.Data[i].Embedding, &v); err != nil || a.Data[i].Index != i || a.Data[i].Object != "embedding" ||
				!reflect.DeepEqual(v, providertest.EmbeddingFor(text, 0)) {
				t.Errorf("line a, vector %d: %s (%v)", i, a.Data[i].Embedding, err)
			}
		}
		bb := byID["b"]
		var s string
		if len(bb.Data) != 1 || json.Unmarshal(bb.Data[0].Embedding, &s) != nil {
			t.Fatalf("line b: %+v", bb)
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != 12 {
			t.Fatalf("line b: base64 %q (%v)", s, err)
		}
		want := providertest.EmbeddingFor("x", 3)
		for i := range 3 {
			if f := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))); f != want[i] {
				t.Errorf("line b, value %d: %v, want %v", i, f, want[i])
			}
		}
	})
}

// A line whose url is not the batch's endpoint fails validation as a
// url_mismatch, either way round; an embeddings line breaking the
// embeddings rules names its parameter.
func TestEmbeddingsBatchValidation(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		resolveAny := func(string) (jobs.Target, bool) { return jobs.Target{Profile: "fast"}, true }
		emb := `{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"x"}}`
		for _, c := range []struct {
			endpoint, line, code, param string
		}{
			{openaiapi.EndpointEmbeddings, line("c", "fast", "hi"), batch.CodeURLMismatch, "url"},
			{openaiapi.EndpointChatCompletions, emb, batch.CodeURLMismatch, "url"},
			{openaiapi.EndpointEmbeddings, `{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":[]}}`, "invalid_value", "body.input"},
		} {
			b := e.createEndpoint(c.endpoint, c.line+"\n")
			step(t, e.processor(e.st, func(cfg *batch.Config) { cfg.Resolve = resolveAny }))
			got := e.wantStatus(b.ID, jobs.BatchFailed)
			if len(got.Errors) != 1 || got.Errors[0].Code != c.code || got.Errors[0].Param != c.param {
				t.Errorf("%s in a %s batch: errors %+v, want %s on %s", c.line, c.endpoint, got.Errors, c.code, c.param)
			}
		}
	})
}

// createEndpoint stores content as an input file and creates a batch of
// it for endpoint.
func (e *env) createEndpoint(endpoint, content string) jobs.Batch {
	e.t.Helper()
	ctx := context.Background()
	f, err := e.st.CreateFile(ctx, jobs.CreateFileParams{OrgID: "acme", CreatedBy: "ann", Purpose: jobs.PurposeBatch,
		Filename: "in.jsonl", Content: strings.NewReader(content)})
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := e.st.CreateBatch(ctx, jobs.CreateBatchParams{OrgID: "acme", CreatedBy: "ann", InputFileID: f.ID,
		Endpoint: endpoint, CompletionWindow: "24h", Window: 24 * time.Hour, Priority: &priority})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}
