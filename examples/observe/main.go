// Command observe is an offline demonstration of promptkit's transient
// retries and execution observations.
//
// One engine, configured from embedded assets, runs two application-owned
// profiles ("proposer" and "assessor") on one finite backend
// (max_active: 1). A scripted http.RoundTripper under the built-in client
// plays the provider: it answers the proposal once with HTTP 429, then with
// a valid structured proposal, then answers the assessment with a
// structurally valid verdict that the application accepts or rejects by
// its own rule. The example collects the runs' execution events and prints
// a compact JSON summary of metadata only: no prompt, response body or
// provider text.
//
// The 429 carries "Retry-After: 0", so the engine's default backoff
// (250–500 ms before the first retry) applies: the program takes about half
// a second. It exits non-zero if anything unexpected happens.
//
//	go run ./examples/observe
package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit"
)

//go:embed assets
var assets embed.FS

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "observe:", err)
		os.Exit(1)
	}
}

// Summary is what the example prints. It is the application's own record,
// translated from promptkit's events: promptkit gives events no stable
// serialized form.
type Summary struct {
	Runs       []RunSummary `json:"runs"`
	Assessment string       `json:"assessment"` // "accepted" or "rejected", the application's decision
	// ProviderRequests is how many HTTP requests the scripted transport
	// answered; it equals the sum of the runs' attempts.
	ProviderRequests int `json:"provider_requests"`
}

// RunSummary describes one run from its events.
type RunSummary struct {
	PromptID         string `json:"prompt_id"`
	PromptVersion    string `json:"prompt_version"`
	ProfileID        string `json:"profile_id"`
	BackendID        string `json:"backend_id"`
	Attempts         uint64 `json:"attempts"`
	TransientRetries uint64 `json:"transient_retries"`
	RepairCalls      uint64 `json:"repair_calls"`
	// FinishedOutcome and FinishedFailure come from the finished event;
	// Validation from the RunResult.
	FinishedOutcome string           `json:"finished_outcome"`
	FinishedFailure string           `json:"finished_failure,omitempty"`
	Validation      string           `json:"validation"`
	Events          map[string]int   `json:"events"`
	AttemptLog      []AttemptSummary `json:"attempt_log"`
	Usage           UsageFlags       `json:"usage"`
}

// UsageFlags is the finished event's observed usage.
type UsageFlags struct {
	PromptTokens     UsageSummary `json:"prompt_tokens"`
	CompletionTokens UsageSummary `json:"completion_tokens"`
	TotalTokens      UsageSummary `json:"total_tokens"`
	CachedTokens     UsageSummary `json:"cached_tokens"`
	ReasoningTokens  UsageSummary `json:"reasoning_tokens"`
}

// AttemptSummary is one attempt event, metadata only.
type AttemptSummary struct {
	Generation uint64 `json:"generation"`
	Attempt    uint64 `json:"attempt"`
	Status     int    `json:"status,omitempty"`
	Outcome    string `json:"outcome"`
	Failure    string `json:"failure,omitempty"`
}

// UsageSummary is one observed token count of a finished event.
type UsageSummary struct {
	Value    int  `json:"value"`
	Known    bool `json:"known"`
	Complete bool `json:"complete"`
}

// proposal and assessment are the application's view of the outputs.
type proposal struct {
	Title string   `json:"title"`
	Steps []string `json:"steps"`
	Risk  string   `json:"risk"`
}

type assessment struct {
	Verdict  string   `json:"verdict"`
	Score    int      `json:"score"`
	Concerns []string `json:"concerns"`
}

// run builds the engine, runs the proposal and its assessment, and writes
// the summary to w.
func run(ctx context.Context, w io.Writer) error {
	cfg, err := promptkit.LoadConfig(assets, "assets/promptkit.yaml")
	if err != nil {
		return err
	}
	provider := newScriptedProvider(
		reply{model: "demo-proposer", status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"0"}},
			body: `{"error":{"message":"rate limited","type":"rate_limit_error","code":"rate_limit_exceeded"}}`},
		reply{model: "demo-proposer", status: http.StatusOK,
			body: completion("demo-proposer", `{"title":"Ship the report","steps":["Collect figures","Draft","Review"],"risk":"low"}`, 120, 40)},
		reply{model: "demo-assessor", status: http.StatusOK,
			body: completion("demo-assessor", `{"verdict":"accept","score":8,"concerns":["Review needs an owner"]}`, 90, 20)},
	)
	// The built-in client runs on this http.Client, so it still gets the
	// engine's transient retries. (A transport that retries on its own
	// would be paired with TransientRetries: zero.)
	cfg.HTTPClient = &http.Client{Transport: provider}
	eng, err := promptkit.New(cfg)
	if err != nil {
		return err
	}

	var sum Summary

	// Proposal.
	propEvents := &collector{}
	res, err := eng.Run(ctx, promptkit.RunRequest{
		PromptID:  "propose",
		ProfileID: "proposer",
		Inputs:    map[string]any{"task": "Publish the quarterly report."},
		Observer:  propEvents.observe,
	})
	if err != nil {
		return fmt.Errorf("proposal: %w", errors.Join(err, provider.unexpected())) // promptkit errors are redacted
	}
	if res.Validation.Status != promptkit.ValidationValid {
		return fmt.Errorf("proposal: validation %s", res.Validation.Status)
	}
	var prop proposal
	if err := res.DecodeOutput(&prop); err != nil {
		return errors.New("proposal: output does not decode")
	}
	rs, err := propEvents.summarize(res)
	if err != nil {
		return fmt.Errorf("proposal: %w", err)
	}
	sum.Runs = append(sum.Runs, rs)

	// Assessment, on the same backend through another profile.
	propJSON, err := json.Marshal(prop)
	if err != nil {
		return err
	}
	assessEvents := &collector{}
	res, err = eng.Run(ctx, promptkit.RunRequest{
		PromptID:  "assess",
		ProfileID: "assessor",
		Inputs:    map[string]any{"proposal": string(propJSON)},
		Observer:  assessEvents.observe,
	})
	if err != nil {
		return fmt.Errorf("assessment: %w", errors.Join(err, provider.unexpected()))
	}
	if res.Validation.Status != promptkit.ValidationValid {
		return fmt.Errorf("assessment: validation %s", res.Validation.Status)
	}
	var verdict assessment
	if err := res.DecodeOutput(&verdict); err != nil {
		return errors.New("assessment: output does not decode")
	}
	rs, err = assessEvents.summarize(res)
	if err != nil {
		return fmt.Errorf("assessment: %w", err)
	}
	sum.Runs = append(sum.Runs, rs)

	// A structurally valid assessment is not automatically acceptable: the
	// application applies its own rule.
	sum.Assessment = "rejected"
	if verdict.Verdict == "accept" && verdict.Score >= 7 && prop.Risk != "high" {
		sum.Assessment = "accepted"
	}

	if err := provider.done(); err != nil {
		return err
	}
	sum.ProviderRequests = provider.served()
	var attempts uint64
	for _, r := range sum.Runs {
		attempts += r.Attempts
	}
	if attempts != uint64(sum.ProviderRequests) {
		return fmt.Errorf("runs report %d attempts, provider saw %d requests", attempts, sum.ProviderRequests)
	}

	return writeSummary(w, sum)
}

// writeSummary writes sum as one JSON document with one run per line, so
// it stays compact and each run's fields can be found with a line search.
func writeSummary(w io.Writer, sum Summary) error {
	var b bytes.Buffer
	b.WriteString(`{"runs":[`)
	for i, r := range sum.Runs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(line)
	}
	rest, err := json.Marshal(struct {
		Assessment       string `json:"assessment"`
		ProviderRequests int    `json:"provider_requests"`
	}{sum.Assessment, sum.ProviderRequests})
	if err != nil {
		return err
	}
	b.WriteString("\n],")
	b.Write(rest[1:]) // the remaining fields, without the opening brace
	b.WriteByte('\n')
	if !json.Valid(b.Bytes()) {
		return errors.New("summary is not valid JSON")
	}
	_, err = w.Write(b.Bytes())
	return err
}

// collector keeps one run's events. Run delivers them synchronously on the
// calling goroutine and one run's events never overlap, so a per-run
// collector needs no lock. An observer shared by concurrent runs would.
type collector struct {
	events []promptkit.ExecutionEvent
}

func (c *collector) observe(ev promptkit.ExecutionEvent) {
	c.events = append(c.events, ev) // values only: safe to retain
}

// summarize checks the event sequence against the result and reduces it to
// metadata.
func (c *collector) summarize(res *promptkit.RunResult) (RunSummary, error) {
	n := len(c.events)
	if n < 2 || c.events[0].Kind != promptkit.ExecutionStarted || c.events[n-1].Kind != promptkit.ExecutionFinished {
		return RunSummary{}, errors.New("events do not run from started to finished")
	}
	fin := c.events[n-1]
	rs := RunSummary{
		PromptID:         fin.PromptID,
		PromptVersion:    fin.PromptVersion,
		ProfileID:        fin.ProfileID,
		BackendID:        fin.BackendID,
		Attempts:         fin.Attempts,
		TransientRetries: fin.TransientRetries,
		RepairCalls:      fin.RepairCalls,
		Events:           map[string]int{},
		FinishedOutcome:  string(fin.Outcome),
		FinishedFailure:  string(fin.Failure),
		Validation:       string(res.Validation.Status),
		Usage: UsageFlags{
			PromptTokens:     usage(fin.Usage.PromptTokens),
			CompletionTokens: usage(fin.Usage.CompletionTokens),
			TotalTokens:      usage(fin.Usage.TotalTokens),
			CachedTokens:     usage(fin.Usage.CachedTokens),
			ReasoningTokens:  usage(fin.Usage.ReasoningTokens),
		},
	}
	for _, ev := range c.events {
		if ev.RunID != res.RunID {
			return RunSummary{}, errors.New("event RunID differs from the result's")
		}
		rs.Events[string(ev.Kind)]++
		if ev.Kind == promptkit.ExecutionAttempt {
			rs.AttemptLog = append(rs.AttemptLog, AttemptSummary{
				Generation: ev.Generation,
				Attempt:    ev.Attempt,
				Status:     ev.StatusCode,
				Outcome:    string(ev.Outcome),
				Failure:    string(ev.Failure),
			})
		}
	}
	if rs.Events[string(promptkit.ExecutionStarted)] != 1 || rs.Events[string(promptkit.ExecutionFinished)] != 1 {
		return RunSummary{}, errors.New("expected exactly one started and one finished event")
	}
	if fin.Attempts != uint64(res.Attempts) || fin.RepairCalls != uint64(res.RepairCalls) {
		return RunSummary{}, errors.New("finished totals differ from the result")
	}
	if fin.Outcome != promptkit.ExecutionOutcomeSuccess {
		return RunSummary{}, fmt.Errorf("finished with outcome %q", fin.Outcome)
	}
	return rs, nil
}

func usage(c promptkit.ObservedTokenCount) UsageSummary {
	return UsageSummary{Value: c.Value, Known: c.Known, Complete: c.Complete}
}

// reply is one scripted provider answer; model is the model the request
// must ask for.
type reply struct {
	model  string
	status int
	header http.Header
	body   string
}

// scriptedProvider is an http.RoundTripper that answers requests from a
// script, in order, and fails anything it does not expect. It never opens
// a connection.
type scriptedProvider struct {
	mu     sync.Mutex
	script []reply
	next   int
	err    error // first unexpected request
}

func newScriptedProvider(rs ...reply) *scriptedProvider {
	return &scriptedProvider{script: rs}
}

func (p *scriptedProvider) RoundTrip(req *http.Request) (*http.Response, error) {
	var body struct {
		Model string `json:"model"`
	}
	raw, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	fail := func(msg string) (*http.Response, error) {
		if p.err == nil {
			p.err = errors.New("scripted provider: " + msg)
		}
		return nil, p.err
	}
	switch {
	case err != nil:
		return fail("request body is not JSON")
	case req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/chat/completions"):
		return fail("unexpected method or path")
	case p.next >= len(p.script):
		return fail("more requests than scripted")
	}
	r := p.script[p.next]
	p.next++
	if body.Model != r.model {
		return fail(fmt.Sprintf("request %d asks for model %q, want %q", p.next, body.Model, r.model))
	}
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range r.header {
		h[k] = v
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)),
		StatusCode:    r.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(r.body))),
		ContentLength: int64(len(r.body)),
		Request:       req,
	}, nil
}

// unexpected returns the first unexpected request, if any.
func (p *scriptedProvider) unexpected() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// done reports an unexpected request or an unused scripted reply.
func (p *scriptedProvider) done() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if p.next != len(p.script) {
		return fmt.Errorf("scripted provider: %d of %d replies used", p.next, len(p.script))
	}
	return nil
}

func (p *scriptedProvider) served() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// completion builds a chat-completion body reporting prompt, completion
// and total tokens, but not cached or reasoning tokens.
func completion(model, content string, promptTokens, completionTokens int) string {
	b, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-demo",
		"object":  "chat.completion",
		"created": 0,
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{
			"prompt_tokens":     promptTokens,
			"completion_tokens": completionTokens,
			"total_tokens":      promptTokens + completionTokens,
		},
	})
	return string(b)
}
