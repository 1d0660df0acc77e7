package jobstest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// testEmbeddingPrompts checks that a prompt's embeddings request comes
// back from every read (GetPrompt, GetPrompts, BatchResults) as stored,
// that other prompts have none, and that the store refuses one that
// breaks the rules (EmbeddingRequest.Normalize) or comes with another
// kind of prompt, without quoting an input.
func testEmbeddingPrompts(t *testing.T, h Harness) {
	f := setup(t, h)
	one := &jobs.EmbeddingRequest{Input: []string{"héllo"}}
	two := &jobs.EmbeddingRequest{Input: []string{"a", "b \"quoted\"\n"}, Dimensions: ptr(8), EncodingFormat: pktype.EncodingBase64}
	single := f.enqueue(jobs.EnqueueParams{OrgID: "org-1", Embedding: one})
	// A response with vectors and no text, as a worker stores one.
	f.claimID("w", single.JobID)
	vectors := json.RawMessage(`[[0.25,-1,3.5e-7]]`)
	j, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: single.JobID, Worker: "w", Answer: jobs.Answer{Parsed: vectors, Model: "emb-1"}})
	if err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	plain := f.enqueue(jobs.EnqueueParams{OrgID: "org-1"})
	b := f.newBatch("org-1")
	lines, err := f.store.EnqueueBatch(f.ctx, []jobs.EnqueueParams{
		{OrgID: "org-1", CreatedBy: "u", Embedding: two, BatchID: b.ID, CustomID: "line-1"},
		{OrgID: "org-1", CreatedBy: "u", Chat: chatRequest("x"), BatchID: b.ID, CustomID: "line-2"},
	})
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	want := map[string]*jobs.EmbeddingRequest{
		plain.PromptID:    nil,
		single.PromptID:   one,
		lines[0].PromptID: two,
		lines[1].PromptID: nil,
	}
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	many, err := f.store.GetPrompts(f.ctx, "org-1", ids)
	if err != nil {
		t.Fatalf("GetPrompts: %v", err)
	}
	for id, w := range want {
		p, err := f.store.GetPrompt(f.ctx, "org-1", id)
		if err != nil {
			t.Fatalf("GetPrompt: %v", err)
		}
		for what, got := range map[string]jobs.Prompt{"GetPrompt": p, "GetPrompts": many[id]} {
			if !reflect.DeepEqual(got.Embedding, w) {
				t.Errorf("%s(%s): embedding %+v, want %+v", what, id, got.Embedding, w)
			}
			if w != nil && (got.Text != "" || got.Chat != nil || got.PromptRef != "") {
				t.Errorf("%s(%s): an embeddings prompt has text, a chat or a prompt ref", what, id)
			}
		}
	}
	rs, err := f.store.BatchResults(f.ctx, jobs.BatchResultsParams{BatchID: b.ID})
	if err != nil || len(rs) != 2 {
		t.Fatalf("BatchResults = %d lines, %v; want 2", len(rs), err)
	}
	if !reflect.DeepEqual(rs[0].Prompt.Embedding, two) || rs[1].Prompt.Embedding != nil || rs[1].Prompt.Chat == nil {
		t.Errorf("BatchResults: embeddings %+v and %+v, want %+v and none", rs[0].Prompt.Embedding, rs[1].Prompt.Embedding, two)
	}

	r, err := f.store.GetResponse(f.ctx, "org-1", j.ResponseID)
	if err != nil {
		t.Fatalf("GetResponse: %v", err)
	}
	var got, wantV [][]float64
	if err := json.Unmarshal(r.Parsed, &got); err != nil {
		t.Fatalf("stored vectors %s: %v", r.Parsed, err)
	}
	_ = json.Unmarshal(vectors, &wantV)
	if r.Output != "" || !reflect.DeepEqual(got, wantV) {
		t.Errorf("response: output %q, vectors %v; want none and %v", r.Output, got, wantV)
	}

	const secret = "secret-input"
	for name, p := range map[string]jobs.EnqueueParams{
		"no inputs":       {Embedding: &jobs.EmbeddingRequest{}},
		"an empty input":  {Embedding: &jobs.EmbeddingRequest{Input: []string{secret, ""}}},
		"a NUL":           {Embedding: &jobs.EmbeddingRequest{Input: []string{secret + "\x00"}}},
		"too many inputs": {Embedding: &jobs.EmbeddingRequest{Input: make([]string, pktype.MaxEmbeddingInputs+1)}},
		"zero dimensions": {Embedding: &jobs.EmbeddingRequest{Input: []string{secret}, Dimensions: ptr(0)}},
		"a bad format":    {Embedding: &jobs.EmbeddingRequest{Input: []string{secret}, EncodingFormat: "int8"}},
		"text too":        {Text: secret, Embedding: &jobs.EmbeddingRequest{Input: []string{secret}}},
		"chat too":        {Chat: chatRequest(secret), Embedding: &jobs.EmbeddingRequest{Input: []string{secret}}},
	} {
		p.OrgID, p.CreatedBy = "org-1", "u"
		_, err := f.store.Enqueue(f.ctx, p)
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: Enqueue = %v, want ErrInvalid", name, err)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error quotes the input: %v", name, err)
		}
	}
}
