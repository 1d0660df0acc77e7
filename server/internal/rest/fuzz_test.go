package rest

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/httpapi"
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

// FuzzParseUsageQuery: the usage query parser never panics, and what it
// accepts is a read the store accepts: a range that is not empty, groups
// each known and given once, at most maxUsageDays day buckets, and filters
// of one non-empty value.
func FuzzParseUsageQuery(f *testing.F) {
	for _, s := range []string{
		"start_time=0",
		"start_time=1733000000&end_time=1733600000&bucket_width=1d&group_by=model,api_key_id",
		"start_time=1&group_by[]=org_id&group_by[]=user_id&models=gpt-x&api_key_ids=tok",
		"start_time=5&end_time=5", "start_time=-1", "start_time=1e3", "bucket_width=1h&start_time=0",
		"start_time=0&group_by=model,,model", "start_time=0&users=a", "start_time=0&backends=a,b",
		"start_time=%zz", "start_time=0;end_time=1",
	} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		u, err := parseUsageQuery(q, now)
		if err != nil {
			var p *httpapi.Problem
			if !errors.As(err, &p) || p.Status != 400 {
				t.Fatalf("%q: error %v is not a 400", raw, err)
			}
			return
		}
		if _, err := u.params.Normalize(); err != nil {
			t.Fatalf("%q accepted but the store refuses it: %v", raw, err)
		}
		if !u.params.From.Before(u.params.To) {
			t.Fatalf("%q: empty range %v–%v", raw, u.params.From, u.params.To)
		}
		if got := len(usagePage(u, nil).Data); got < 1 || got > maxUsageDays {
			t.Fatalf("%q: %d buckets", raw, got)
		}
		for _, v := range []string{u.params.UserID, u.params.TokenID, u.params.Model, u.params.Backend} {
			if strings.Contains(v, ",") {
				t.Fatalf("%q: filter %q", raw, v)
			}
		}
	})
}
