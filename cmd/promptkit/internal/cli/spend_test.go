package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// With prices in promptkit.yaml, `jobs show` prints a job's cost and
// `jobs metrics --by-org --by-token` the spend per org and per token;
// a call whose usage the provider did not report is counted as unknown.
func TestJobsShowCostAndMetricsSpend(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	defer srv.Close()
	srv.Enqueue(
		providertest.Response{Text: "ok", Usage: providertest.Usage{PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500,
			ReasoningTokens: 100}},
		providertest.Response{Text: "ok", Usage: providertest.Usage{Mode: providertest.UsageAbsent}},
	)
	cfg := quickstart(t, srv.URL)
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, "\nprices:\n  - {model: some-model, input_per_million: 2, output_per_million: 10}\n"...)
	if err := os.WriteFile(cfg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "jobs.db")
	var ids []string
	for _, text := range []string{"priced", "unreported"} {
		code, out, errOut := run(t, "submit", "--config", cfg, "--database", db, "--text", text, "--json")
		var sub struct {
			JobID string `json:"job_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &sub) != nil {
			t.Fatalf("submit: %d %s %s", code, out, errOut)
		}
		ids = append(ids, sub.JobID)
		if code, _, log := run(t, "worker", "--once", "--config", cfg, "--database", db); code != 0 {
			t.Fatalf("worker --once: %d %s", code, log)
		}
	}
	for i, want := range []string{"cost $0.007000\n", "cost unknown\n"} {
		code, out, errOut := run(t, "jobs", "show", ids[i], "--database", db)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("jobs show %s: %d %q %s; want %q", ids[i], code, out, errOut, want)
		}
	}
	code, out, errOut := run(t, "jobs", "metrics", "--by-org", "--by-token", "--database", db)
	if code != 0 {
		t.Fatalf("jobs metrics: %d %s", code, errOut)
	}
	// The local identity's org; no token in local mode.
	for _, want := range []string{"default  2      1000          500            0       100        1              0.007000  1",
		"-      2      1000          500            0       100        1              0.007000  1"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs metrics lacks %q:\n%s", want, out)
		}
	}
}
