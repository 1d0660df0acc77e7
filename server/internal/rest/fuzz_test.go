package rest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// FuzzDecodeSubmission: the submission decoder never panics; what it
// accepts is valid for the store, and its fingerprint depends only on the
// decoded request (a re-encoding of it has the same hash).
func FuzzDecodeSubmission(f *testing.F) {
	for _, s := range []string{
		`{"text": "hi"}`,
		`{"prompt": "summarize", "inputs": {"b": 2, "a": [1, {"z": null}]}, "priority": 0}`,
		`{"text": "x", "scheduled_for": "2026-12-03T10:00:00.123456789+02:00", "max_attempts": 9}`,
		`{"text": "x", "execution_options": {"model": "m", "depth": 3, "prefer_provider": "b"}}`,
		`{"text": "x", "parent_id": "p", "depends_on": "j", "profile": "fast"}`,
		`{"text": "x", "inputs": null, "execution_options": null}`,
		`{"text": "\u0000\ud800"}`,
		`{"text": 1e400}`,
		`[]`, `null`, `{"text": "x"} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, hash, err := decodeSubmission(body)
		if err != nil {
			return
		}
		if _, err := p.Normalize(); err != nil {
			t.Fatalf("accepted %q but Normalize refuses it again: %v", body, err)
		}
		if hash == "" {
			t.Fatal("no fingerprint")
		}
		// Re-encode the accepted request and decode it again.
		req := jobs.Submission{Text: p.Text, Prompt: p.PromptRef, Inputs: p.Inputs, Priority: p.Priority,
			Profile: p.Profile, ParentID: p.ParentID, DependsOn: p.DependsOn, MaxAttempts: &p.MaxAttempts,
			ExecutionOptions: p.ExecutionOptions.JSON()}
		if !p.AvailableAt.IsZero() {
			req.ScheduledFor = &p.AvailableAt
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		_, again, err := decodeSubmission(b)
		if errors.Is(err, jobs.ErrInvalid) || err != nil {
			t.Fatalf("re-encoded %s refused: %v", b, err)
		}
		if again != hash {
			t.Fatalf("fingerprint changed on re-encoding %q → %s", body, b)
		}
	})
}
