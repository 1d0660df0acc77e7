package sdkcompat

// The front door's compatibility tests: the official OpenAI Go SDK, with
// only its base URL changed and its own retries off, against a real
// `promptkit serve` (the built binary, a child process) whose backends are
// providertest fakes. Chat, structured output, streaming with usage, an
// error of each status the SDK must tell apart, files, and batches.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/promptkit/promptkit/bench/internal/pkbin"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/providertest"
)

// service is a running `promptkit serve` with an API token, and the fake
// providers behind its backends: main answers normally; limited,
// broken and slow answer what a test scripts (429s, 500s, held replies)
// and otherwise like main. Each backend has a profile of its name whose
// model is "<name>-model".
type service struct {
	url                         string
	token                       string
	main, limited, broken, slow *providertest.Server
}

// serveDeadline bounds a service's start and stop.
const serveDeadline = 30 * time.Second

// serviceSetup is what startService starts beyond its defaults.
type serviceSetup struct {
	mainOpts         []providertest.Option
	transientRetries int
	workers          int
}

// serviceOption changes what startService starts.
type serviceOption func(*serviceSetup)

// withMain configures the main backend's fake with opts.
func withMain(opts ...providertest.Option) serviceOption {
	return func(c *serviceSetup) { c.mainOpts = append(c.mainOpts, opts...) }
}

// withTransientRetries sets the engine's transient_retries: the extra
// provider calls one job attempt makes after a 429 or 5xx. Defaults to 0.
func withTransientRetries(n int) serviceOption {
	return func(c *serviceSetup) { c.transientRetries = n }
}

// withWorkers sets how many jobs serve runs at once. Defaults to serve's
// own default (4).
func withWorkers(n int) serviceOption {
	return func(c *serviceSetup) { c.workers = n }
}

// promptkitBin is the promptkit binary TestMain builds from the tree the
// bench module replaces; every test runs it as a child process.
var promptkitBin string

func TestMain(m *testing.M) {
	bin, cleanup, err := pkbin.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdkcompat:", err)
		os.Exit(1)
	}
	promptkitBin = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// startService runs `promptkit serve` on a fresh SQLite database, as a
// child process, until the test ends.
func startService(t *testing.T, opts ...serviceOption) *service {
	t.Helper()
	var setup serviceSetup
	for _, o := range opts {
		o(&setup)
	}
	s := &service{}
	for _, p := range []**providertest.Server{&s.main, &s.limited, &s.broken, &s.slow} {
		var fakeOpts []providertest.Option
		if p == &s.main {
			fakeOpts = setup.mainOpts
		}
		*p = providertest.NewServer(fakeOpts...)
		t.Cleanup((*p).Close)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "jobs.db")
	// transient_retries 0 unless a test asks for more: each job attempt is
	// one provider call, so what a test scripts is what a job meets.
	cfg := fmt.Sprintf(`transient_retries: %d
backends:
  - {id: main, base_url: %s}
  - {id: limited, base_url: %s}
  - {id: broken, base_url: %s}
  - {id: slow, base_url: %s}
profiles:
  - {id: default, backend: main, model: main-model}
  - {id: limited, backend: limited, model: limited-model}
  - {id: broken, backend: broken, model: broken-model}
  - {id: slow, backend: slow, model: slow-model}
`, setup.transientRetries, s.main.URL, s.limited.URL, s.broken.URL, s.slow.URL)
	cfgPath := filepath.Join(dir, "promptkit.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// A token makes every request need one, so a wrong key is a 401.
	out, err := pkbin.Run(t.Context(), promptkitBin, "tokens", "create", "--org", "acme", "--user", "sdk", "--role", "admin",
		"--database", db, "--config", cfgPath)
	if err != nil {
		t.Fatalf("tokens create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.token = lines[len(lines)-1]

	logPath := filepath.Join(dir, "serve.log")
	args := []string{"--database", db, "--config", cfgPath, "--addr", "127.0.0.1:0"}
	if setup.workers > 0 {
		args = append(args, "--workers", strconv.Itoa(setup.workers))
	}
	srv, err := pkbin.StartServe(promptkitBin, logPath, serveDeadline, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Terminate(serveDeadline); err != nil {
			log, _ := os.ReadFile(logPath)
			t.Errorf("%v:\n%s", err, log)
		}
	})
	s.url = srv.URL
	return s
}

// client is an SDK client of s with key as its API key: only the base
// URL changed, and the SDK's own retries off so that every status is
// seen as promptkit sent it.
func (s *service) client(key string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(s.url+"/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(2*time.Minute),
	)
}

func userChat(model, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

func TestFrontDoorChat(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	ctx := t.Context()

	var res *http.Response
	c, err := cl.Chat.Completions.New(ctx, userChat("default", "say hi to the door"), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Fake provider reply: say hi to the door" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("completion %s", c.RawJSON())
	}
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Created == 0 {
		t.Errorf("completion id %q object %q created %d", c.ID, c.Object, c.Created)
	}
	// The provider counts 5 prompt words and 7 reply words; promptkit
	// passes its counts on.
	if u := c.Usage; u.PromptTokens != 5 || u.CompletionTokens != 8 || u.TotalTokens != 13 {
		t.Errorf("usage %d + %d = %d, want the provider's 5 + 8 = 13", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
	if n := s.main.Count(); n != 1 {
		t.Errorf("the provider saw %d calls, want 1", n)
	}

	// The same model named as a backend's model, not a profile id.
	c, err = cl.Chat.Completions.New(ctx, userChat("main-model", "by model name"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Fake provider reply: by model name" {
		t.Errorf("by model name: %s", c.RawJSON())
	}

	// A repeat with the same Idempotency-Key is the same completion, and
	// the provider is not asked again.
	key := option.WithHeader("Idempotency-Key", "door-key-1")
	first, err := cl.Chat.Completions.New(ctx, userChat("default", "only once please"), key)
	if err != nil {
		t.Fatal(err)
	}
	calls := s.main.Count()
	again, err := cl.Chat.Completions.New(ctx, userChat("default", "only once please"), key)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("repeat with the same Idempotency-Key: %s, want %s", again.RawJSON(), first.RawJSON())
	}
	if n := s.main.Count(); n != calls {
		t.Errorf("a repeat with the same Idempotency-Key made %d more provider calls", n-calls)
	}
}

func TestFrontDoorModels(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)
	page, err := cl.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range page.Data {
		ids[m.ID] = true
	}
	for _, want := range []string{"default", "limited", "main-model"} {
		if !ids[want] {
			t.Errorf("GET /v1/models lists %v, without %q", ids, want)
		}
	}
}

// A json_schema answer goes through promptkit's validation: what comes
// back parses and satisfies the schema.
func TestFrontDoorStructuredOutput(t *testing.T) {
	t.Parallel()
	s := startService(t)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city":    map[string]any{"type": "string", "minLength": 1},
			"rating":  map[string]any{"type": "integer", "minimum": 1, "maximum": 5},
			"visited": map[string]any{"type": "boolean"},
		},
		"required":             []string{"city", "rating", "visited"},
		"additionalProperties": false,
	}
	p := userChat("default", "rate a city")
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
		OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{
			Name: "rating", Schema: schema, Strict: openai.Bool(true),
		}},
	}
	cl := s.client(s.token)
	c, err := cl.Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		City    *string `json:"city"`
		Rating  *int    `json:"rating"`
		Visited *bool   `json:"visited"`
	}
	dec := json.NewDecoder(strings.NewReader(c.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("content %q does not parse as the schema's object: %v", c.Choices[0].Message.Content, err)
	}
	if got.City == nil || *got.City == "" || got.Rating == nil || *got.Rating < 1 || *got.Rating > 5 || got.Visited == nil {
		t.Errorf("content %q does not satisfy the schema", c.Choices[0].Message.Content)
	}
	// The provider was asked with the schema as its response_format.
	reqs := s.main.Requests()
	if len(reqs) != 1 || reqs[0].ResponseFormat == nil {
		t.Fatalf("provider requests %+v, want one with a response_format", reqs)
	}
}

func TestFrontDoorStream(t *testing.T) {
	t.Parallel()
	s := startService(t)
	p := userChat("default", "tell me a story")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	cl := s.client(s.token)
	stream := cl.Chat.Completions.NewStreaming(t.Context(), p)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks, usageChunks := 0, 0
	for stream.Next() {
		ch := stream.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("accumulator refused chunk %s", ch.RawJSON())
		}
		chunks++
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("chunk object %q", ch.Object)
		}
		if ch.Usage.TotalTokens > 0 {
			usageChunks++
			if len(ch.Choices) != 0 {
				t.Errorf("usage chunk has choices: %s", ch.RawJSON())
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if usageChunks != 1 {
		t.Errorf("%d usage chunks in %d, want 1", usageChunks, chunks)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Fake provider reply: tell me a story" || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("accumulated %+v", acc.Choices)
	}
	if u := acc.Usage; u.PromptTokens != 4 || u.CompletionTokens != 7 || u.TotalTokens != 11 {
		t.Errorf("usage %d + %d = %d, want the provider's 4 + 7 = 11", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
}

// Each error reaches the SDK as *openai.Error with the status an SDK
// user handles: 400 naming the parameter, 401, 404, 429 with
// Retry-After, and 5xx.
func TestFrontDoorErrors(t *testing.T) {
	t.Parallel()
	s := startService(t)
	cl := s.client(s.token)

	apiError := func(t *testing.T, err error, status int) *openai.Error {
		t.Helper()
		var e *openai.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v (%T), want *openai.Error", err, err)
		}
		if e.StatusCode != status {
			t.Fatalf("status %d (%s), want %d", e.StatusCode, e.RawJSON(), status)
		}
		if e.Message == "" || e.Type == "" {
			t.Errorf("error object %s without message or type", e.RawJSON())
		}
		return e
	}

	// n up to OpenAI's limit goes to the backend (faithful_test.go);
	// more is refused before a job is made.
	t.Run("400 n over the limit", func(t *testing.T) {
		p := userChat("default", "too many answers")
		p.N = openai.Int(openaiapi.MaxChoices + 1)
		_, err := cl.Chat.Completions.New(t.Context(), p)
		if e := apiError(t, err, http.StatusBadRequest); e.Param != "n" || e.Type != "invalid_request_error" {
			t.Errorf("param %q type %q, want n and invalid_request_error", e.Param, e.Type)
		}
	})
	t.Run("400 tool name", func(t *testing.T) {
		p := userChat("default", "call a tool")
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "look up"})}
		_, err := cl.Chat.Completions.New(t.Context(), p)
		if e := apiError(t, err, http.StatusBadRequest); e.Param != "tools[0].function.name" {
			t.Errorf("param %q, want tools[0].function.name", e.Param)
		}
	})
	t.Run("401 wrong key", func(t *testing.T) {
		wrong := s.client("pk_not_a_real_token")
		_, err := wrong.Chat.Completions.New(t.Context(), userChat("default", "let me in"))
		apiError(t, err, http.StatusUnauthorized)
	})
	t.Run("404 unknown model", func(t *testing.T) {
		_, err := cl.Chat.Completions.New(t.Context(), userChat("no-such-model", "anyone there"))
		apiError(t, err, http.StatusNotFound)
	})
	// A provider failure is retried as a job while attempts remain
	// (backing off 5 s, then 25 s); X-Promptkit-Max-Attempts: 1 answers
	// the first one, as a client that wants no job retries would.
	once := option.WithHeader("X-Promptkit-Max-Attempts", "1")
	t.Run("429 rate limited", func(t *testing.T) {
		t.Parallel()
		scriptFailures(s.limited, providertest.Status(http.StatusTooManyRequests).WithRetryAfter("1"))
		_, err := cl.Chat.Completions.New(t.Context(), userChat("limited", "too fast"), once)
		e := apiError(t, err, http.StatusTooManyRequests)
		if ra, perr := strconv.Atoi(e.Response.Header.Get("Retry-After")); perr != nil || ra < 1 {
			t.Errorf("Retry-After %q, want a number of seconds", e.Response.Header.Get("Retry-After"))
		}
		if n := s.limited.Count(); n != 1 {
			t.Errorf("the provider saw %d calls, want one (one job attempt)", n)
		}
	})
	t.Run("5xx provider failure", func(t *testing.T) {
		t.Parallel()
		scriptFailures(s.broken, providertest.Status(http.StatusInternalServerError))
		_, err := cl.Chat.Completions.New(t.Context(), userChat("broken", "fall over"), once)
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode < 500 || e.StatusCode > 599 {
			t.Fatalf("error %v, want *openai.Error with a 5xx status", err)
		}
		if n := s.broken.Count(); n != 1 {
			t.Errorf("the provider saw %d calls, want one (one job attempt)", n)
		}
	})
}

// scriptFailures has srv answer r to more calls than any job attempts.
func scriptFailures(srv *providertest.Server, r providertest.Response) {
	for range 20 {
		srv.Enqueue(r)
	}
}

// batchInput is a batch input file of n lines for model: custom_id
// "req-i" asks "question i".
func batchInput(t *testing.T, model string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		line, err := json.Marshal(map[string]any{
			"custom_id": fmt.Sprintf("req-%d", i), "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("question %d", i)}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// createBatch uploads input and creates a chat completions batch of it.
func createBatch(t *testing.T, cl openai.Client, input []byte) *openai.Batch {
	t.Helper()
	return createBatchFor(t, cl, input, openai.BatchNewParamsEndpointV1ChatCompletions)
}

// createBatchFor uploads input and creates a batch of it for endpoint.
func createBatchFor(t *testing.T, cl openai.Client, input []byte, endpoint openai.BatchNewParamsEndpoint) *openai.Batch {
	t.Helper()
	ctx := t.Context()
	f, err := cl.Files.New(ctx, openai.FileNewParams{
		File: openai.File(bytes.NewReader(input), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.ID == "" || f.Bytes != int64(len(input)) || f.Purpose != openai.FileObjectPurposeBatch || f.Filename != "input.jsonl" {
		t.Fatalf("uploaded file %s", f.RawJSON())
	}
	got, err := cl.Files.Get(ctx, f.ID)
	if err != nil || got.ID != f.ID || got.Bytes != f.Bytes {
		t.Fatalf("Files.Get: %v %s", err, got.RawJSON())
	}
	b, err := cl.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: f.ID, Endpoint: endpoint,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Metadata:         map[string]string{"job": "sdkcompat"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == "" || b.InputFileID != f.ID || b.Endpoint != string(endpoint) || b.CompletionWindow != "24h" || b.Metadata["job"] != "sdkcompat" {
		t.Fatalf("created batch %s", b.RawJSON())
	}
	return b
}

// batchDeadline bounds waiting for a batch to end.
const batchDeadline = time.Minute

// waitBatch reads the batch until it is terminal. Each read carries
// promptkit's ?wait=, which holds it until the batch is terminal or the
// wait ends, so the test waits on the server instead of polling; a read
// the wait ended early is simply made again, within batchDeadline.
func waitBatch(t *testing.T, cl openai.Client, id string) *openai.Batch {
	t.Helper()
	end := time.Now().Add(batchDeadline)
	for {
		b, err := cl.Batches.Get(t.Context(), id, option.WithQuery("wait", "30s"))
		if err != nil {
			t.Fatal(err)
		}
		switch b.Status {
		case openai.BatchStatusCompleted, openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
			return b
		}
		if time.Now().After(end) {
			t.Fatalf("batch still %s with %+v after %v", b.Status, b.RequestCounts, batchDeadline)
		}
	}
}

// fileLines downloads a file through the SDK and returns its lines by
// custom_id, failing on a repeated one.
func fileLines(t *testing.T, cl openai.Client, id string) map[string]batchOutputLine {
	t.Helper()
	out := map[string]batchOutputLine{}
	if id == "" {
		return out
	}
	res, err := cl.Files.Content(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l batchOutputLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("file %s: line %q: %v", id, sc.Text(), err)
		}
		if _, dup := out[l.CustomID]; dup {
			t.Errorf("file %s: custom_id %s twice", id, l.CustomID)
		}
		out[l.CustomID] = l
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// batchOutputLine is a line of an output or error file, the completion
// decoded by the SDK's own type.
type batchOutputLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int                   `json:"status_code"`
		Body       openai.ChatCompletion `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func TestFrontDoorBatch(t *testing.T) {
	t.Parallel()
	const lines = 25
	s := startService(t)
	cl := s.client(s.token)
	b := createBatch(t, cl, batchInput(t, "default", lines))
	b = waitBatch(t, cl, b.ID)
	if b.Status != openai.BatchStatusCompleted {
		t.Fatalf("batch %s: %s", b.Status, b.RawJSON())
	}
	if rc := b.RequestCounts; rc.Total != lines || rc.Completed != lines || rc.Failed != 0 {
		t.Errorf("request_counts %+v, want %d completed", rc, lines)
	}
	if b.CompletedAt == 0 || b.InProgressAt == 0 || b.FinalizingAt == 0 || b.OutputFileID == "" {
		t.Errorf("completed batch %s", b.RawJSON())
	}
	out := fileLines(t, cl, b.OutputFileID)
	for i := range lines {
		id := fmt.Sprintf("req-%d", i)
		l, ok := out[id]
		switch {
		case !ok:
			t.Errorf("custom_id %s missing from the output file", id)
		case l.Response == nil || l.Response.StatusCode != http.StatusOK || l.Error != nil:
			t.Errorf("line %s: %+v", id, l)
		case len(l.Response.Body.Choices) != 1 || l.Response.Body.Choices[0].Message.Content != fmt.Sprintf("Fake provider reply: question %d", i):
			t.Errorf("line %s: completion %s", id, l.Response.Body.RawJSON())
		case l.Response.Body.Usage.TotalTokens == 0:
			t.Errorf("line %s: no usage in %s", id, l.Response.Body.RawJSON())
		}
	}
	if len(out) != lines {
		t.Errorf("output file has %d lines, want %d", len(out), lines)
	}
	if errs := fileLines(t, cl, b.ErrorFileID); len(errs) != 0 {
		t.Errorf("error file has %d lines, want none", len(errs))
	}
	if n := s.main.Count(); n != lines {
		t.Errorf("the provider saw %d calls, want %d", n, lines)
	}

	// The batch is listed; the input file can be deleted.
	page, err := cl.Batches.List(t.Context(), openai.BatchListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
		t.Errorf("Batches.List: %v %+v", err, page)
	}
	if del, err := cl.Files.Delete(t.Context(), b.InputFileID); err != nil || !del.Deleted {
		t.Errorf("Files.Delete: %v %+v", err, del)
	}
}

func TestFrontDoorBatchCancel(t *testing.T) {
	t.Parallel()
	const lines = 10
	s := startService(t)
	cl := s.client(s.token)
	// The slow provider holds every call until the test lets go, so no
	// line can finish before the cancel.
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release()
	for range lines {
		s.slow.Enqueue(providertest.Response{Hold: hold, Text: "too late"})
	}
	b := createBatch(t, cl, batchInput(t, "slow", lines))
	ctx, cancel := context.WithTimeout(t.Context(), batchDeadline)
	defer cancel()
	if err := s.slow.WaitArrivals(ctx, 1); err != nil {
		t.Fatalf("no line reached the provider: %v", err)
	}
	c, err := cl.Batches.Cancel(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != openai.BatchStatusCancelling && c.Status != openai.BatchStatusCancelled {
		t.Fatalf("cancel answered %s, want cancelling or cancelled", c.Status)
	}
	if c.CancellingAt == 0 {
		t.Errorf("cancelled batch without cancelling_at: %s", c.RawJSON())
	}
	release()
	b = waitBatch(t, cl, b.ID)
	if b.Status != openai.BatchStatusCancelled || b.CancelledAt == 0 {
		t.Fatalf("batch %s, want cancelled: %s", b.Status, b.RawJSON())
	}
	// Every line is accounted for once, in one of the two files.
	out, errs := fileLines(t, cl, b.OutputFileID), fileLines(t, cl, b.ErrorFileID)
	for i := range lines {
		id := fmt.Sprintf("req-%d", i)
		_, inOut := out[id]
		e, inErr := errs[id]
		if inOut == inErr {
			t.Errorf("custom_id %s in the output file %v, in the error file %v: want exactly one", id, inOut, inErr)
		}
		if inErr && e.Error == nil && (e.Response == nil || e.Response.StatusCode < 400) {
			t.Errorf("error line %s without an error: %+v", id, e)
		}
	}
	if rc := b.RequestCounts; rc.Total != lines || rc.Completed != int64(len(out)) {
		t.Errorf("request_counts %+v, with %d lines in the output file", rc, len(out))
	}
}
