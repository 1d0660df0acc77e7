package batch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/lifecycle"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/batch"
	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine (a worker's loop, a store's
// watcher) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const endpoint = "/v1/chat/completions"

// env is a store on a fresh database, a processor clock the test moves,
// and the spool directory the processor must leave empty.
type env struct {
	t      *testing.T
	db     storekit.DB
	st     jobs.Store
	spool  string
	offset atomic.Int64 // added to the real time: the processor's clock
}

// eachStore runs fn on an env per store kind (storekit.Each: parallel
// subtests, PostgreSQL skipped without PROMPTKIT_TEST_DATABASE_URL).
func eachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) { fn(t, newEnv(t, db)) })
}

// newEnv opens an env on db (storekit.SQLite.New(t), say).
func newEnv(t *testing.T, db storekit.DB) *env {
	t.Helper()
	e := &env{t: t, db: db, spool: filepath.Join(t.TempDir(), "spool")}
	if err := os.Mkdir(e.spool, 0o700); err != nil {
		t.Fatal(err)
	}
	e.st = e.open()
	t.Cleanup(func() {
		if ents, err := os.ReadDir(e.spool); err != nil || len(ents) > 0 {
			t.Errorf("spool dir after the test: %v entries (err %v); the processor must remove its files", len(ents), err)
		}
	})
	return e
}

// open opens another connection to the test's database, as another
// process would.
func (e *env) open() jobs.Store { return e.db.Open(e.t, jobs.Options{}) }

func resolve(model string) (jobs.Target, bool) {
	switch model {
	case "fast":
		return jobs.Target{Profile: "fast"}, true
	case "big-model":
		return jobs.Target{Profile: "fast", Options: jobs.ExecutionOptions{Model: "big-model"}}, true
	}
	return jobs.Target{}, false
}

func (e *env) processor(st jobs.Store, mod ...func(*batch.Config)) *batch.Processor {
	e.t.Helper()
	cfg := batch.Config{Store: st, Codec: openaiapi.BatchCodec{}, Resolve: resolve, TempDir: e.spool,
		Now: func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := batch.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// line is a valid input line.
func line(customID, model, content string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":%q,"body":{"model":%q,"messages":[{"role":"user","content":%q}]}}`,
		customID, endpoint, model, content)
}

func lines(n int) []string {
	var ls []string
	for i := range n {
		ls = append(ls, line(fmt.Sprintf("req-%d", i), "fast", fmt.Sprintf("question %d", i)))
	}
	return ls
}

var priority = 77

// create stores content as an input file and creates a batch of it.
func (e *env) create(content string) jobs.Batch {
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

func (e *env) createLines(ls ...string) jobs.Batch {
	return e.create(strings.Join(ls, "\n") + "\n")
}

func step(t *testing.T, p *batch.Processor) {
	t.Helper()
	if err := p.Step(context.Background()); err != nil {
		t.Fatalf("Step: %v", err)
	}
}

func (e *env) get(id string) jobs.Batch {
	e.t.Helper()
	b, err := e.st.GetBatch(context.Background(), "", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) wantStatus(id string, want jobs.BatchStatus) jobs.Batch {
	e.t.Helper()
	b := e.get(id)
	if b.Status != want {
		e.t.Fatalf("batch %s is %s (errors %+v), want %s", id, b.Status, b.Errors, want)
	}
	return b
}

// results reads every line of a batch.
func (e *env) results(id string) []jobs.BatchResult {
	e.t.Helper()
	var all []jobs.BatchResult
	after := ""
	for {
		page, err := e.st.BatchResults(context.Background(), jobs.BatchResultsParams{BatchID: id, After: after, Limit: 1000})
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all
		}
		after = page[len(page)-1].Prompt.ID
	}
}

// settle claims every queued job and ends each as outcome says by its
// custom_id: "ok" succeeds, "fail" fails; a job with no outcome stays
// running (unfinished).
func (e *env) settle(outcome map[string]string) {
	e.t.Helper()
	ctx := context.Background()
	claimed, err := e.st.Claim(ctx, jobs.ClaimParams{Worker: "w1", Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, j := range claimed {
		p, err := e.st.GetPrompt(ctx, "", j.PromptID)
		if err != nil {
			e.t.Fatal(err)
		}
		switch outcome[p.CustomID] {
		case "ok":
			_, err = e.st.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: "w1", Answer: jobs.Answer{Output: "answer to " + p.CustomID,
				Model: "fast", FinishReason: "stop"}})
		case "fail":
			_, err = e.st.Fail(ctx, jobs.FailParams{JobID: j.ID, Worker: "w1", Kind: jobs.KindProvider4xx, Message: "the provider refused it"})
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// outputLine is the part of an output or error line the tests look at.
type outputLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int `json:"status_code"`
	} `json:"response"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// file reads a batch output file's lines; none for an empty ID.
func (e *env) file(id string) []outputLine {
	e.t.Helper()
	if id == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := e.st.ReadFile(context.Background(), "acme", id, &buf); err != nil {
		e.t.Fatalf("reading file %s: %v", id, err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
		e.t.Errorf("file %s does not end in a newline", id)
	}
	var out []outputLine
	for l := range strings.SplitSeq(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		var o outputLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			e.t.Fatalf("file %s: a line is not JSON: %v", id, err)
		}
		out = append(out, o)
	}
	return out
}

// outputs reads a finished batch's two files and checks that every
// custom_id of the batch appears exactly once across them; it returns
// each custom_id's line and whether it is in the error file.
func (e *env) outputs(b jobs.Batch, ids []string) (map[string]outputLine, map[string]bool) {
	e.t.Helper()
	got := map[string]outputLine{}
	inErr := map[string]bool{}
	for _, f := range []struct {
		id    string
		isErr bool
	}{{b.OutputFileID, false}, {b.ErrorFileID, true}} {
		for _, o := range e.file(f.id) {
			if _, dup := got[o.CustomID]; dup {
				e.t.Errorf("custom_id %s appears more than once", o.CustomID)
			}
			got[o.CustomID], inErr[o.CustomID] = o, f.isErr
		}
	}
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			e.t.Errorf("custom_id %s is in neither file", id)
		}
	}
	if len(got) != len(ids) {
		e.t.Errorf("files hold %d custom_ids, want %d", len(got), len(ids))
	}
	return got, inErr
}

func TestValidBatchEnqueuesEveryLineAtTheBatchPriority(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(line("a", "fast", "one"), line("b", "big-model", "two"), line("c", "fast", "three"))
		step(t, e.processor(e.st))

		got := e.wantStatus(b.ID, jobs.BatchInProgress)
		if got.Counts.Total != 3 || got.InProgressAt.IsZero() {
			t.Errorf("in_progress batch: counts %+v, in_progress_at %v; want total 3 and a time", got.Counts, got.InProgressAt)
		}
		rs := e.results(b.ID)
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.Prompt.CustomID)
			if r.Job.State != jobs.Queued || r.Job.Priority != priority {
				t.Errorf("line %s: job %s at priority %d, want queued at %d", r.Prompt.CustomID, r.Job.State, r.Job.Priority, priority)
			}
			if r.Prompt.OrgID != "acme" || r.Prompt.CreatedBy != "ann" || r.Prompt.BatchID != b.ID || r.Prompt.Profile != "fast" {
				t.Errorf("line %s: prompt org %q user %q batch %q profile %q", r.Prompt.CustomID, r.Prompt.OrgID, r.Prompt.CreatedBy, r.Prompt.BatchID, r.Prompt.Profile)
			}
			if r.Prompt.Chat == nil || len(r.Prompt.Chat.Messages) != 1 {
				t.Errorf("line %s: chat %+v, want the line's one message", r.Prompt.CustomID, r.Prompt.Chat)
			}
			opts := r.Job.ExecutionOptions
			if want := map[string]string{"a": "", "b": "big-model", "c": ""}[r.Prompt.CustomID]; opts.Model != want {
				t.Errorf("line %s: execution model %q, want %q", r.Prompt.CustomID, opts.Model, want)
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"a", "b", "c"}) {
			t.Errorf("lines enqueued: %v, want a b c", ids)
		}

		// Another step changes nothing while the jobs run.
		step(t, e.processor(e.st))
		e.wantStatus(b.ID, jobs.BatchInProgress)
		if n := len(e.results(b.ID)); n != 3 {
			t.Errorf("%d lines after a second step, want 3", n)
		}
	})
}

func TestInvalidLinesFailTheBatchNamingThem(t *testing.T) {
	t.Parallel()
	const secret = "zebra-4711" // in every bad line: must not be quoted back
	good := line("g", "fast", "fine")
	cases := []struct {
		name      string
		content   string
		wantLine  int
		wantCode  string
		wantParam string
	}{
		{"not JSON", good + "\n{\"custom_id\": \"" + secret + "\", \n", 2, batch.CodeInvalidJSON, ""},
		{"duplicate custom_id", good + "\n" + line("g", "fast", secret) + "\n", 2, batch.CodeDuplicate, "custom_id"},
		{"other url", good + "\n" + strings.Replace(line("x", "fast", secret), endpoint, "/v1/embeddings", 1) + "\n", 2, batch.CodeURLMismatch, "url"},
		{"method GET", strings.Replace(line("x", "fast", secret), `"POST"`, `"GET"`, 1) + "\n" + good + "\n", 1, "", ""},
		{"stream true", good + "\n" + strings.Replace(line("x", "fast", secret), `"messages"`, `"stream":true,"messages"`, 1) + "\n", 2, "", ""},
		{"unknown model", good + "\n" + line("x", "no-such-model", secret) + "\n", 2, batch.CodeModelNotFound, "body.model"},
		{"no custom_id", good + "\n" + strings.Replace(line("x", "fast", secret), `"custom_id":"x",`, "", 1) + "\n", 2, "", ""},
		{"blank line in the middle", good + "\n\n" + line("x", "fast", secret) + "\n", 2, batch.CodeInvalidJSON, ""},
		{"empty file", "\n\n", 0, batch.CodeEmptyFile, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, storekit.SQLite.New(t))
			b := e.create(c.content)
			step(t, e.processor(e.st))
			got := e.wantStatus(b.ID, jobs.BatchFailed)
			if len(got.Errors) != 1 {
				t.Fatalf("errors %+v, want one", got.Errors)
			}
			be := got.Errors[0]
			if be.Line != c.wantLine || be.Message == "" || be.Code == "" {
				t.Errorf("error %+v, want line %d with a code and a message", be, c.wantLine)
			}
			if c.wantCode != "" && be.Code != c.wantCode {
				t.Errorf("code %q, want %q", be.Code, c.wantCode)
			}
			if c.wantParam != "" && be.Param != c.wantParam {
				t.Errorf("param %q, want %q", be.Param, c.wantParam)
			}
			if strings.Contains(be.Message, secret) {
				t.Errorf("the message quotes the line: %q", be.Message)
			}
			if got.FailedAt.IsZero() {
				t.Error("failed_at is not set")
			}
			if n := len(e.results(b.ID)); n != 0 {
				t.Errorf("a failed batch has %d lines enqueued, want none", n)
			}
		})
	}
}

func TestValidationReportsEveryBadLineUpToALimit(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		var ls []string
		for i := range batch.MaxErrors + 50 {
			ls = append(ls, line(fmt.Sprintf("r%d", i), "no-such-model", "q"))
		}
		b := e.createLines(ls...)
		step(t, e.processor(e.st))
		got := e.wantStatus(b.ID, jobs.BatchFailed)
		if len(got.Errors) != batch.MaxErrors {
			t.Fatalf("%d errors, want the first %d", len(got.Errors), batch.MaxErrors)
		}
		for i, be := range got.Errors {
			if be.Line != i+1 {
				t.Fatalf("error %d names line %d, want %d", i, be.Line, i+1)
			}
		}
	})
}

func TestTooManyLinesFailTheBatch(t *testing.T) {
	t.Parallel()
	// Validation alone, the same on every store: SQLite only.
	e := newEnv(t, storekit.SQLite.New(t))
	var sb strings.Builder
	for i := range batch.MaxLines + 1 {
		sb.WriteString(line(fmt.Sprint(i), "fast", "q"))
		sb.WriteByte('\n')
	}
	b := e.create(sb.String())
	step(t, e.processor(e.st))
	got := e.wantStatus(b.ID, jobs.BatchFailed)
	if len(got.Errors) != 1 || got.Errors[0].Code != batch.CodeTooMany {
		t.Fatalf("errors %+v, want one %s", got.Errors, batch.CodeTooMany)
	}
}

// Config.MaxLines moves the cap: one line over it fails the batch with
// no job enqueued, and exactly that many lines run.
func TestConfiguredMaxLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storekit.SQLite.New(t))
	const limit = 7
	p := e.processor(e.st, func(c *batch.Config) { c.MaxLines = limit })
	over := e.createLines(lines(limit + 1)...)
	step(t, p)
	got := e.wantStatus(over.ID, jobs.BatchFailed)
	if len(got.Errors) != 1 || got.Errors[0].Code != batch.CodeTooMany || !strings.Contains(got.Errors[0].Message, "more than 7 requests") {
		t.Fatalf("errors %+v, want one %s naming the cap", got.Errors, batch.CodeTooMany)
	}
	if prog, err := e.st.BatchProgress(context.Background(), over.ID); err != nil || prog.Lines != 0 {
		t.Fatalf("a batch over the cap enqueued jobs: %+v (err %v)", prog, err)
	}
	fits := e.createLines(lines(limit)...)
	step(t, p)
	if got := e.wantStatus(fits.ID, jobs.BatchInProgress); got.Counts.Total != limit {
		t.Fatalf("counts %+v, want %d requests", got.Counts, limit)
	}
	if _, err := batch.New(batch.Config{Store: e.st, Codec: openaiapi.BatchCodec{}, Resolve: resolve, MaxLines: -1}); err == nil {
		t.Fatal("New took a negative MaxLines")
	}
}

func TestMissingInputFileFailsTheBatch(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(2)...)
		if err := e.st.DeleteFile(context.Background(), "acme", b.InputFileID); err != nil {
			t.Fatal(err)
		}
		step(t, e.processor(e.st))
		got := e.wantStatus(b.ID, jobs.BatchFailed)
		if len(got.Errors) != 1 || got.Errors[0].Code != batch.CodeFileNotFound {
			t.Fatalf("errors %+v, want one %s", got.Errors, batch.CodeFileNotFound)
		}
	})
}

func TestCheckRefusesLinesTheEngineCannotRun(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(line("a", "fast", "fine"), line("b", "fast", "refuse me"))
		p := e.processor(e.st, func(c *batch.Config) {
			c.Check = func(_ context.Context, p jobs.EnqueueParams) error {
				if p.CustomID == "b" {
					return &jobs.RequestError{Param: "body.messages", Message: "the backend cannot take this"}
				}
				return nil
			}
		})
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchFailed)
		if len(got.Errors) != 1 || got.Errors[0].Line != 2 || got.Errors[0].Param != "body.messages" || got.Errors[0].Code != batch.CodeInvalid {
			t.Fatalf("errors %+v, want line 2, param body.messages, code %s", got.Errors, batch.CodeInvalid)
		}
	})
}

// faulty is a store whose EnqueueBatch fails after failEnqueueAfter
// successful calls, and whose first MoveBatch fails when failMove is
// set: a process dying mid-way.
type faulty struct {
	jobs.Store
	mu               sync.Mutex
	enqueues         int
	failEnqueueAfter int // 0: never
	failMove         bool
	beforeMove       func()
}

var errInjected = errors.New("injected fault")

func (f *faulty) EnqueueBatch(ctx context.Context, ps []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	f.mu.Lock()
	f.enqueues++
	fail := f.failEnqueueAfter > 0 && f.enqueues > f.failEnqueueAfter
	f.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return f.Store.EnqueueBatch(ctx, ps)
}

func (f *faulty) MoveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	f.mu.Lock()
	fail, before := f.failMove, f.beforeMove
	f.failMove, f.beforeMove = false, nil
	f.mu.Unlock()
	if before != nil {
		before()
	}
	if fail {
		return jobs.Batch{}, errInjected
	}
	return f.Store.MoveBatch(ctx, p)
}

func TestRerunAfterAPartialEnqueueAddsNoDuplicate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fault func() *faulty
	}{
		{"died after the first chunk", func() *faulty { return &faulty{failEnqueueAfter: 1} }},
		{"died before moving to in_progress", func() *faulty { return &faulty{failMove: true} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, e *env) {
				const n = 1234 // three chunks
				b := e.createLines(lines(n)...)
				f := c.fault()
				f.Store = e.st
				if err := e.processor(f).Step(context.Background()); !errors.Is(err, errInjected) {
					t.Fatalf("first step: %v, want the injected fault", err)
				}
				e.wantStatus(b.ID, jobs.BatchValidating)
				if len(e.results(b.ID)) == 0 {
					t.Fatal("the first step enqueued nothing: the fault came too early to test a re-run")
				}

				// Another process, with its own connection, takes over.
				step(t, e.processor(e.open()))
				got := e.wantStatus(b.ID, jobs.BatchInProgress)
				rs := e.results(b.ID)
				seen := map[string]bool{}
				for _, r := range rs {
					if seen[r.Prompt.CustomID] {
						t.Fatalf("custom_id %s enqueued twice", r.Prompt.CustomID)
					}
					seen[r.Prompt.CustomID] = true
				}
				if len(rs) != n || got.Counts.Total != n {
					t.Errorf("%d lines enqueued, counts %+v; want %d", len(rs), got.Counts, n)
				}
			})
		})
	}
}

func TestCompletionWritesEachCustomIDOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(5)...)
		p := e.processor(e.st)
		step(t, p)
		e.wantStatus(b.ID, jobs.BatchInProgress)

		// Three of five finished: the batch waits for the other two.
		e.settle(map[string]string{"req-0": "ok", "req-1": "fail", "req-2": "ok"})
		step(t, p)
		e.wantStatus(b.ID, jobs.BatchInProgress)

		ctx := context.Background()
		running, err := e.st.ListJobs(ctx, jobs.ListParams{JobFilter: jobs.JobFilter{State: jobs.Running}})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range running.Jobs {
			pr, _ := e.st.GetPrompt(ctx, "", j.PromptID)
			if pr.CustomID == "req-3" {
				_, err = e.st.Succeed(ctx, jobs.SucceedParams{JobID: j.ID, Worker: "w1", Answer: jobs.Answer{Output: "x", Model: "fast"}})
			} else {
				_, err = e.st.Cancel(ctx, jobs.CancelParams{JobID: j.ID})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchCompleted)
		if want := (jobs.BatchCounts{Total: 5, Completed: 3, Failed: 2}); got.Counts != want {
			t.Errorf("counts %+v, want %+v", got.Counts, want)
		}
		if got.FinalizingAt.IsZero() || got.CompletedAt.IsZero() {
			t.Errorf("finalizing_at %v, completed_at %v: want both set", got.FinalizingAt, got.CompletedAt)
		}
		out, inErr := e.outputs(got, []string{"req-0", "req-1", "req-2", "req-3", "req-4"})
		for id, wantErr := range map[string]bool{"req-0": false, "req-1": true, "req-2": false, "req-3": false, "req-4": true} {
			if inErr[id] != wantErr {
				t.Errorf("%s in the error file: %v, want %v", id, inErr[id], wantErr)
			}
			if o := out[id]; !wantErr && (o.Response == nil || o.Response.StatusCode != 200) {
				t.Errorf("%s: output line %+v, want status 200", id, o)
			}
		}
		// Nothing is left to do: further steps change nothing.
		step(t, p)
		if again := e.get(b.ID); again.OutputFileID != got.OutputFileID || again.Status != jobs.BatchCompleted {
			t.Errorf("a later step changed the batch: %+v", again)
		}
	})
}

func TestAllSucceededStoresNoErrorFile(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(2)...)
		p := e.processor(e.st)
		step(t, p)
		e.settle(map[string]string{"req-0": "ok", "req-1": "ok"})
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchCompleted)
		if got.OutputFileID == "" || got.ErrorFileID != "" {
			t.Errorf("output file %q, error file %q: want only an output file", got.OutputFileID, got.ErrorFileID)
		}
		e.outputs(got, []string{"req-0", "req-1"})
	})
}

func TestFinalizingAfterACrashCompletes(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(2)...)
		step(t, e.processor(e.st))
		e.settle(map[string]string{"req-0": "ok", "req-1": "fail"})
		// A process moved the batch to finalizing and died.
		if _, err := e.st.MoveBatch(context.Background(), jobs.MoveBatchParams{ID: b.ID, From: jobs.BatchInProgress, To: jobs.BatchFinalizing}); err != nil {
			t.Fatal(err)
		}
		step(t, e.processor(e.open()))
		got := e.wantStatus(b.ID, jobs.BatchCompleted)
		e.outputs(got, []string{"req-0", "req-1"})
	})
}

func TestExpiryReportsUnfinishedLinesAsExpired(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(3)...)
		p := e.processor(e.st)
		step(t, p)
		e.settle(map[string]string{"req-0": "ok"}) // req-1, req-2 stay running

		e.offset.Store(int64(23 * time.Hour))
		step(t, p)
		e.wantStatus(b.ID, jobs.BatchInProgress)

		e.offset.Store(int64(24*time.Hour + time.Second))
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchExpired)
		if got.ExpiredAt.IsZero() {
			t.Error("expired_at is not set")
		}
		if want := (jobs.BatchCounts{Total: 3, Completed: 1, Failed: 2}); got.Counts != want {
			t.Errorf("counts %+v, want %+v", got.Counts, want)
		}
		out, inErr := e.outputs(got, []string{"req-0", "req-1", "req-2"})
		if inErr["req-0"] {
			t.Error("the finished line is in the error file")
		}
		for _, id := range []string{"req-1", "req-2"} {
			if o := out[id]; !inErr[id] || o.Error == nil || o.Error.Code != "batch_expired" {
				t.Errorf("%s: in error file %v, line %+v; want error code batch_expired", id, inErr[id], o)
			}
		}
		prog, err := e.st.BatchProgress(context.Background(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if prog.Unfinished != 0 {
			t.Errorf("%d jobs still unfinished after expiry, want 0", prog.Unfinished)
		}
	})
}

func TestCancelEndsTheBatchAsCancelled(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(3)...)
		p := e.processor(e.st)
		step(t, p)
		e.settle(map[string]string{"req-0": "ok"})
		if _, err := e.st.CancelBatch(context.Background(), "acme", b.ID); err != nil {
			t.Fatal(err)
		}
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchCancelled)
		if got.CancelledAt.IsZero() {
			t.Error("cancelled_at is not set")
		}
		out, inErr := e.outputs(got, []string{"req-0", "req-1", "req-2"})
		for _, id := range []string{"req-1", "req-2"} {
			if o := out[id]; !inErr[id] || o.Error == nil || o.Error.Code != "batch_cancelled" {
				t.Errorf("%s: in error file %v, line %+v; want error code batch_cancelled", id, inErr[id], o)
			}
		}
		if inErr["req-0"] {
			t.Error("the line that succeeded before the cancel is in the error file")
		}
	})
}

func TestCancelWhileValidatingCancelsTheEnqueuedJobs(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(3)...)
		// The cancel lands after the lines are enqueued, just before the
		// processor moves the batch to in_progress.
		f := &faulty{Store: e.st, beforeMove: func() {
			if _, err := e.st.CancelBatch(context.Background(), "acme", b.ID); err != nil {
				t.Error(err)
			}
		}}
		p := e.processor(f)
		step(t, p)
		prog, err := e.st.BatchProgress(context.Background(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if prog.Lines != 3 || prog.Unfinished != 0 {
			t.Errorf("progress %+v: want 3 lines, none left to run", prog)
		}
		step(t, p)
		got := e.wantStatus(b.ID, jobs.BatchCancelled)
		e.outputs(got, []string{"req-0", "req-1", "req-2"})
	})
}

func TestCancelBeforeValidation(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(2)...)
		if _, err := e.st.CancelBatch(context.Background(), "acme", b.ID); err != nil {
			t.Fatal(err)
		}
		step(t, e.processor(e.st))
		got := e.wantStatus(b.ID, jobs.BatchCancelled)
		if got.OutputFileID != "" || got.ErrorFileID != "" || got.Counts.Total != 0 {
			t.Errorf("a batch cancelled before validation: files %q %q, counts %+v; want none", got.OutputFileID, got.ErrorFileID, got.Counts)
		}
	})
}

func TestTwoProcessorsRacingStoreOneOutputFile(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		b := e.createLines(lines(40)...)
		step(t, e.processor(e.st))
		all := map[string]string{}
		var ids []string
		for i := range 40 {
			id := fmt.Sprintf("req-%d", i)
			ids = append(ids, id)
			all[id] = map[bool]string{true: "ok", false: "fail"}[i%4 != 0]
		}
		e.settle(all)

		ps := []*batch.Processor{e.processor(e.st), e.processor(e.open())}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, len(ps))
		for i, p := range ps {
			wg.Go(func() {
				<-start
				errs[i] = p.Step(context.Background())
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("processor %d: %v", i, err)
			}
		}
		got := e.wantStatus(b.ID, jobs.BatchCompleted)
		e.outputs(got, ids)
		files, _, err := e.st.ListFiles(context.Background(), jobs.FileListParams{OrgID: "acme", Purpose: jobs.PurposeBatchOutput})
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 2 {
			t.Errorf("%d batch_output files stored, want 2 (one output, one error file)", len(files))
		}
	})
}

// signalling is a store that reports each ActiveBatches call and each
// batch moved, and whose notifications the test sends.
type signalling struct {
	jobs.Store
	looked chan struct{}
	moved  chan jobs.BatchStatus
	notify chan struct{}
}

func (s *signalling) MoveBatch(ctx context.Context, p jobs.MoveBatchParams) (jobs.Batch, error) {
	b, err := s.Store.MoveBatch(ctx, p)
	if err == nil {
		s.moved <- b.Status
	}
	return b, err
}

func (s *signalling) ActiveBatches(ctx context.Context) ([]jobs.Batch, error) {
	bs, err := s.Store.ActiveBatches(ctx)
	s.looked <- struct{}{}
	return bs, err
}

// Notifier is the processor's by default (Config.Notifier): its wake-ups
// are the test's.
func (s *signalling) Notifier() jobs.Notifier { return chanNotifier{s.Store.Notifier(), s.notify} }

type chanNotifier struct {
	jobs.Notifier
	notify chan struct{}
}

func (n chanNotifier) Notify(ctx context.Context) <-chan struct{} { return n.notify }

func TestStartStepsAtOnceOnNotifyUntilStop(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		s := &signalling{Store: e.st, looked: make(chan struct{}), moved: make(chan jobs.BatchStatus), notify: make(chan struct{}, 1)}
		p := e.processor(s, func(c *batch.Config) { c.Interval = time.Hour })
		if err := p.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}

		<-s.looked // the first step, at once
		b := e.createLines(lines(2)...)
		s.notify <- struct{}{}
		<-s.looked // a step on the notification, long before the hour
		if st := <-s.moved; st != jobs.BatchInProgress {
			t.Errorf("the step moved the batch to %s, want in_progress", st)
		}
		e.wantStatus(b.ID, jobs.BatchInProgress)

		for range 2 {
			if err := p.Stop(t.Context()); err != nil {
				t.Errorf("Stop: %v, want nil", err)
			}
		}
		if err := p.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
			t.Errorf("Start after Stop: %v, want ErrStarted: a Processor starts once", err)
		}
	})
}

// Stopping a processor that never started is safe, and it will not
// start then.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storekit.SQLite.New(t))
	p := e.processor(e.st)
	for range 2 {
		if err := p.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start: %v", err)
		}
	}
	if err := p.Start(t.Context()); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storekit.SQLite.New(t))
	codec := openaiapi.BatchCodec{}
	for _, cfg := range []batch.Config{
		{Codec: codec, Resolve: resolve},
		{Store: e.st, Codec: codec},
		{Store: e.st, Resolve: resolve},
		{Store: e.st, Codec: codec, Resolve: resolve, Interval: -time.Second},
		{Store: e.st, Codec: codec, Resolve: resolve, MaxAttempts: -1},
	} {
		if _, err := batch.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}

// flaky fails BatchProgress while down is set.
type flaky struct {
	jobs.Store
	down atomic.Bool
}

func (f *flaky) BatchProgress(ctx context.Context, id string) (jobs.BatchProgress, error) {
	if f.down.Load() {
		return jobs.BatchProgress{}, errInjected
	}
	return f.Store.BatchProgress(ctx, id)
}

func TestAFailureIsLoggedOnceAndItsEndOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		var logs testkit.Logs
		f := &flaky{Store: e.st}
		p := e.processor(f, func(c *batch.Config) { c.Logger = logs.Logger() })
		b := e.createLines(line("a", "fast", "the secret question"))
		step(t, p)
		e.wantStatus(b.ID, jobs.BatchInProgress)
		if strings.Contains(logs.String(), "level=WARN") {
			t.Fatalf("normal operation logged a warning:\n%s", logs.String())
		}

		f.down.Store(true)
		for range 3 {
			if err := p.Step(context.Background()); !errors.Is(err, errInjected) {
				t.Fatalf("Step with the store failing: %v, want the fault", err)
			}
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Errorf("%d warnings for one lasting fault, want 1:\n%s", n, logs.String())
		}
		f.down.Store(false)
		e.settle(map[string]string{"a": "ok"})
		step(t, p)
		e.wantStatus(b.ID, jobs.BatchCompleted)
		out := logs.String()
		if !strings.Contains(out, "batch processing recovered") || strings.Count(out, "level=WARN") != 1 {
			t.Errorf("want one warning and its recovery:\n%s", out)
		}
		if strings.Contains(out, "secret question") || strings.Contains(out, "answer to") {
			t.Errorf("the log holds line content:\n%s", out)
		}
	})
}
