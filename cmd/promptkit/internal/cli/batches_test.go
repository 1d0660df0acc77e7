package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/server"
)

// batchStore opens the SQLite job database at db for a test to create
// files and batches in, as POST /v1/files and /v1/batches would.
func batchStore(t *testing.T, db string) jobs.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), db, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newBatch stores content as an input file of org and creates a batch
// of it.
func newBatch(t *testing.T, st jobs.Store, org, content string) jobs.Batch {
	t.Helper()
	ctx := context.Background()
	f, err := st.CreateFile(ctx, jobs.CreateFileParams{OrgID: org, CreatedBy: "ann", Purpose: jobs.PurposeBatch,
		Filename: "in.jsonl", Content: strings.NewReader(content)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.CreateBatch(ctx, jobs.CreateBatchParams{OrgID: org, CreatedBy: "ann", InputFileID: f.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: "24h", Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func chatLine(customID, model, content string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":%q}]}}`+"\n",
		customID, model, content)
}

func TestBatchesListShowCancel(t *testing.T) {
	t.Parallel()
	dir, _ := inDir(t, "")
	db := filepath.Join(dir, "b.db")
	expect(t, 1, []string{"batches", "list", "--database", db}, "no database at")
	st := batchStore(t, db)
	expect(t, 0, []string{"batches", "list", "--database", db}, "ID", "STATUS", "TOTAL")

	first := newBatch(t, st, "acme", chatLine("a", "m", "x"))
	second := newBatch(t, st, "globex", chatLine("b", "m", "y"))
	// Validation failed on the second batch.
	if _, err := st.MoveBatch(context.Background(), jobs.MoveBatchParams{ID: second.ID, From: jobs.BatchValidating, To: jobs.BatchFailed,
		Errors: []jobs.BatchError{{Line: 2, Code: "duplicate_custom_id", Param: "custom_id", Message: "The custom_id of this line is the custom_id of line 1."}}}); err != nil {
		t.Fatal(err)
	}

	out := expect(t, 0, []string{"batches", "list", "--database", db}, first.ID, second.ID, "acme", "globex", "validating", "failed")
	if strings.Index(out, second.ID) > strings.Index(out, first.ID) {
		t.Errorf("batches list is not newest first:\n%s", out)
	}
	out = expect(t, 0, []string{"batches", "list", "--database", db, "--limit", "1"}, second.ID, "more batches: add --after "+second.ID)
	if strings.Contains(out, first.ID) {
		t.Errorf("--limit 1 listed two batches:\n%s", out)
	}
	expect(t, 0, []string{"batches", "list", "--database", db, "--after", second.ID}, first.ID)
	expect(t, 0, []string{"batches", "list", "--database", db, "--org", "acme"}, first.ID)

	code, js, _ := run(t, "batches", "list", "--database", db, "--json")
	var listed []jobs.Batch
	if code != 0 || json.Unmarshal([]byte(js), &listed) != nil || len(listed) != 2 || listed[1].ID != first.ID {
		t.Fatalf("batches list --json: exit %d\n%s", code, js)
	}

	expect(t, 0, []string{"batches", "show", second.ID, "--database", db}, "failed", "globex", "input file "+second.InputFileID,
		"requests: 0 total", "validation errors:", "line 2: duplicate_custom_id (custom_id): The custom_id of this line", "created")
	code, js, _ = run(t, "batches", "show", first.ID, "--database", db, "--json")
	var shown jobs.Batch
	if code != 0 || json.Unmarshal([]byte(js), &shown) != nil || shown.ID != first.ID || shown.Status != jobs.BatchValidating {
		t.Fatalf("batches show --json: exit %d\n%s", code, js)
	}

	expect(t, 0, []string{"batches", "cancel", first.ID, "--database", db}, first.ID+" cancelling")
	expect(t, 0, []string{"batches", "cancel", first.ID, "--database", db}, "cancelling")
	expect(t, 1, []string{"batches", "cancel", second.ID, "--database", db}, "batch "+second.ID+" is failed", "only a validating or in_progress batch")
	expect(t, 1, []string{"batches", "cancel", "batch_nope", "--database", db}, "no batch batch_nope")
	expect(t, 1, []string{"batches", "show", "batch_nope", "--database", db}, "no batch batch_nope")
	expect(t, 2, []string{"batches", "show", "--database", db})
	expect(t, 2, []string{"batches", "list", "--database", db, "--limit", "-1"}, "--limit -1")
}

func TestBatchSettingsChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"service:\n  batch_priority: 101\n", "batch_priority 101: want 0–100"},
		{"service:\n  batch_priority: -1\n", "batch_priority -1"},
		{"service:\n  max_file_bytes: 0\n", "max_file_bytes 0 must be above zero"},
		{"service:\n  max_file_bytes: lots\n", "want a whole number"},
		{"service:\n  max_body_bytes: 0\n", "max_body_bytes 0 must be above zero"},
		{"service:\n  max_batch_lines: 0\n", "max_batch_lines 0 must be above zero"},
		{"service:\n  max_batch_lines: -5\n", "max_batch_lines -5 must be above zero"},
	} {
		_, cfg := inDir(t, c.yaml)
		expect(t, 2, []string{"batches", "list", "--config", cfg}, c.want, "promptkit.yaml")
		expect(t, 2, []string{"serve", "--config", cfg}, c.want)
	}
	sc, err := loadService("")
	if err != nil || sc.BatchPriority != jobs.DefaultBatchPriority || sc.MaxFileBytes != jobs.DefaultMaxFileBytes || sc.MaxBodyBytes != server.DefaultMaxBodyBytes || sc.MaxBatchLines != 50_000 {
		t.Fatalf("defaults: batch_priority %d, max_file_bytes %d, max_body_bytes %d, max_batch_lines %d (err %v); want %d, %d, %d and 50000",
			sc.BatchPriority, sc.MaxFileBytes, sc.MaxBodyBytes, sc.MaxBatchLines, err, jobs.DefaultBatchPriority, jobs.DefaultMaxFileBytes, server.DefaultMaxBodyBytes)
	}
	_, cfg := inDir(t, "service:\n  batch_priority: 70\n  max_file_bytes: 1048576\n  max_batch_lines: 2000000\n")
	if sc, err := loadService(cfg); err != nil || sc.BatchPriority != 70 || sc.MaxFileBytes != 1<<20 || sc.MaxBatchLines != 2_000_000 {
		t.Fatalf("loadService: %+v, %v", sc, err)
	}
}

// serve runs a batch to its end: its processor validates the input,
// its workers run the lines on the simulated backend, and the output
// file holds every custom_id once.
func TestServeRunsABatch(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "serve.db")
	st := batchStore(t, db)
	var in strings.Builder
	for i := range 5 {
		model := simulate.ProfileID
		if i%2 == 1 {
			model = simulate.Model
		}
		in.WriteString(chatLine(fmt.Sprintf("req-%d", i), model, fmt.Sprintf("question %d", i)))
	}
	b := newBatch(t, st, "default", in.String())
	// The simulated backend answers any model (serve's fallback profile),
	// so an unknown model is not what fails here: a repeated custom_id is.
	bad := newBatch(t, st, "default", chatLine("x", "gpt-4o-mini", "q")+chatLine("x", "gpt-4o-mini", "q"))
	url, stop := startServe(t, db)
	defer stop()

	// serve holds the read (?wait=) until the batch is terminal.
	resp, err := http.Get(url + "/v1/batches/" + b.ID + "?wait=60s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b, err = st.GetBatch(context.Background(), "", b.ID); err != nil {
		t.Fatal(err)
	}
	if b.Status != jobs.BatchCompleted || b.Counts != (jobs.BatchCounts{Total: 5, Completed: 5}) || b.ErrorFileID != "" {
		t.Fatalf("batch %s, counts %+v, error file %q; want completed 5 of 5 and no error file", b.Status, b.Counts, b.ErrorFileID)
	}
	var buf bytes.Buffer
	if err := st.ReadFile(context.Background(), "default", b.OutputFileID, &buf); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for l := range strings.SplitSeq(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		var o struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Choices []struct {
						Message struct{ Content string }
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("output line is not JSON: %v", err)
		}
		if seen[o.CustomID] || o.Response.StatusCode != 200 || len(o.Response.Body.Choices) != 1 || o.Response.Body.Choices[0].Message.Content == "" {
			t.Errorf("output line for %s: %s", o.CustomID, l)
		}
		seen[o.CustomID] = true
	}
	if len(seen) != 5 {
		t.Errorf("output file holds %d custom_ids, want 5", len(seen))
	}
	expect(t, 0, []string{"batches", "show", b.ID, "--database", db}, "completed", "requests: 5 total, 5 completed, 0 failed", "output file "+b.OutputFileID)
	// A repeated custom_id fails its batch's validation.
	expect(t, 0, []string{"batches", "show", bad.ID, "--database", db}, "failed", "line 2: duplicate_custom_id")
	jobsOut := expect(t, 0, []string{"jobs", "list", "--database", db}, "succeeded")
	if !strings.Contains(jobsOut, fmt.Sprintf(" %d ", jobs.DefaultBatchPriority)) {
		t.Errorf("the batch's jobs did not run at priority %d:\n%s", jobs.DefaultBatchPriority, jobsOut)
	}
}

// serve's batch processor enforces max_batch_lines: a batch of one line
// more fails too_many_tasks, one of exactly that many runs.
func TestServeMaxBatchLines(t *testing.T) {
	t.Parallel()
	dir, cfg := inDir(t, "service:\n  max_batch_lines: 3\n")
	db := filepath.Join(dir, "serve.db")
	st := batchStore(t, db)
	var in strings.Builder
	for i := range 3 {
		in.WriteString(chatLine(fmt.Sprintf("req-%d", i), simulate.ProfileID, "q"))
	}
	fits := newBatch(t, st, "default", in.String())
	over := newBatch(t, st, "default", in.String()+chatLine("req-3", simulate.ProfileID, "q"))
	url, stop := startServe(t, db, "--config", cfg)
	defer stop()
	for _, id := range []string{fits.ID, over.ID} {
		resp, err := http.Get(url + "/v1/batches/" + id + "?wait=60s")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	got, err := st.GetBatch(context.Background(), "", fits.ID)
	if err != nil || got.Status != jobs.BatchCompleted || got.Counts.Completed != 3 {
		t.Fatalf("batch of max_batch_lines lines: %s, counts %+v (err %v); want completed 3", got.Status, got.Counts, err)
	}
	got, err = st.GetBatch(context.Background(), "", over.ID)
	if err != nil || got.Status != jobs.BatchFailed || len(got.Errors) != 1 || got.Errors[0].Code != "too_many_tasks" {
		t.Fatalf("batch of max_batch_lines+1 lines: %s, errors %+v (err %v); want failed, too_many_tasks", got.Status, got.Errors, err)
	}
}

// serve gives its one max_body_bytes to the endpoint and to the batch
// processor: a body the endpoint refuses with 413 is refused as a batch
// line too (request_too_large in the error file), and the batch's other
// lines run.
func TestServeBodyLimitCoversBatchLines(t *testing.T) {
	t.Parallel()
	const limit = 2000
	dir, cfg := inDir(t, fmt.Sprintf("service:\n  max_body_bytes: %d\n", limit))
	db := filepath.Join(dir, "serve.db")
	st := batchStore(t, db)
	big := strings.Repeat("x", limit)
	b := newBatch(t, st, "default", chatLine("big", simulate.ProfileID, big)+chatLine("small", simulate.ProfileID, "q"))
	url, stop := startServe(t, db, "--config", cfg)
	defer stop()

	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, simulate.ProfileID, big)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("direct request over max_body_bytes: %d, want 413", resp.StatusCode)
	}

	resp, err = http.Get(url + "/v1/batches/" + b.ID + "?wait=60s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b, err = st.GetBatch(context.Background(), "", b.ID); err != nil {
		t.Fatal(err)
	}
	if b.Status != jobs.BatchCompleted || b.Counts != (jobs.BatchCounts{Total: 2, Completed: 1, Failed: 1}) {
		t.Fatalf("batch %s, counts %+v; want completed, 1 of 2 failed", b.Status, b.Counts)
	}
	var buf bytes.Buffer
	if err := st.ReadFile(context.Background(), "default", b.ErrorFileID, &buf); err != nil {
		t.Fatal(err)
	}
	var o struct {
		CustomID string `json:"custom_id"`
		Error    struct{ Code string }
	}
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &o); err != nil || o.CustomID != "big" || o.Error.Code != "request_too_large" {
		t.Errorf("error file %q (%v): want big's request_too_large", buf.String(), err)
	}
}
