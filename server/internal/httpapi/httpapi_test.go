package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
)

// TestClassify: one table maps every error to its answer, and each
// dialect writes it in its API's words.
func TestClassify(t *testing.T) {
	t.Parallel()
	invalid := fmt.Errorf("store: %w", &jobs.InvalidError{Field: "max_attempts", Reason: "must be 1–25"})
	for _, c := range []struct {
		name               string
		err                error
		status             int
		rest, openai       string // codes
		restMsg, openaiMsg string
		param              string
	}{
		{"not found", About("prompt", fmt.Errorf("get: %w", jobs.ErrNotFound)), 404, "not_found", "not_found", "prompt: not found", "No such prompt.", ""},
		{"transition", About("cancel", &jobs.TransitionError{From: jobs.Succeeded, To: jobs.Cancelled}), 409, "conflict", "conflict", "cancel: the job is succeeded", "The job is succeeded.", ""},
		{"idempotency", jobs.ErrIdempotencyConflict, 422, "idempotency_conflict", "idempotency_conflict",
			"the Idempotency-Key was used with a different request", "The Idempotency-Key was used with a different request.", ""},
		{"invalid field", invalid, 400, "invalid_request", "invalid_request", jobs.InvalidMessage(invalid), jobs.InvalidMessage(invalid), "max_attempts"},
		{"engine refusal", fmt.Errorf("%w: no such profile", promptkit.ErrProfileNotFound), 400, "invalid_request", "invalid_request", "", "", ""},
		{"openai request", &jobs.RequestError{Param: "n", Code: "unsupported_value", Message: "n must be 1."}, 400, "unsupported_value", "unsupported_value", "n must be 1.", "n must be 1.", "n"},
		{"too large", TooLarge(10), 413, "too_large", "request_too_large", "the body is over 10 bytes", "The body is over 10 bytes.", ""},
		{"rate limited", RateLimited(1500*time.Millisecond, "the token's submission rate of 1 a second"), 429, "rate_limited", "rate_limit_exceeded",
			"the token's submission rate of 1 a second is reached; retry after the Retry-After delay",
			"The token's submission rate of 1 a second is reached; retry after the Retry-After delay.", ""},
		{"org's rate", About("quota", &quota.Exceeded{Scope: jobs.LimitOrg, Rule: quota.RequestsPerMinute, Limit: 60, RetryAfter: time.Second}), 429,
			"rate_limited", "rate_limit_exceeded", "the organisation's limit of 60 requests per minute is reached",
			"The organisation's limit of 60 requests per minute is reached.", ""},
		{"token's budget", About("quota", &quota.Exceeded{Scope: jobs.LimitToken, Rule: quota.DailyBudget, Limit: 5, RetryAfter: time.Hour}), 429,
			"budget_exceeded", "insufficient_quota", "the token's daily budget of $5.00 is reached",
			"The token's daily budget of $5.00 is reached.", ""},
		{"anything else", About("listing", errors.New("disk on fire")), 500, "internal", "internal_error", "internal error", "The server had an error while processing the request.", ""},
	} {
		p := Classify(c.err)
		if p.Status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, p.Status, c.status)
		}
		for _, d := range []Dialect{REST, OpenAI} {
			rec := httptest.NewRecorder()
			d.Write(rec, p)
			var body struct {
				Error struct {
					Code    *string `json:"code"`
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != c.status {
				t.Fatalf("%s %v: %d %s", c.name, d, rec.Code, rec.Body)
			}
			code, msg := c.rest, c.restMsg
			if d == OpenAI {
				code, msg = c.openai, c.openaiMsg
				// A spent budget is OpenAI's insufficient_quota, type and
				// code; every other type follows the status.
				typ := openaiapi.TypeOf(c.status)
				if c.openai == openaiapi.TypeInsufficientQuota {
					typ = c.openai
				}
				if body.Error.Type != typ {
					t.Errorf("%s: type %q", c.name, body.Error.Type)
				}
				if param := ""; body.Error.Param != nil {
					param = *body.Error.Param
					if param != c.param {
						t.Errorf("%s: param %q, want %q", c.name, param, c.param)
					}
				} else if c.param != "" {
					t.Errorf("%s: no param, want %q", c.name, c.param)
				}
			}
			if body.Error.Code == nil || *body.Error.Code != code {
				t.Errorf("%s %v: code %v, want %s", c.name, d, body.Error.Code, code)
			}
			if msg != "" && body.Error.Message != msg {
				t.Errorf("%s %v: message %q, want %q", c.name, d, body.Error.Message, msg)
			}
			if strings.Contains(body.Error.Message, "disk on fire") {
				t.Errorf("%s: the cause reached the answer", c.name)
			}
		}
	}
	rec := httptest.NewRecorder()
	REST.Write(rec, RateLimited(1500*time.Millisecond, "a rate"))
	if got := rec.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2", got)
	}
	rec = httptest.NewRecorder()
	OpenAI.Write(rec, Classify(&quota.Exceeded{Scope: jobs.LimitOrg, Rule: quota.MonthlyBudget, Limit: 20, RetryAfter: 36 * time.Hour}))
	if got := rec.Header().Get("Retry-After"); got != "129600" {
		t.Errorf("a budget's Retry-After %q, want 129600", got)
	}
}

// TestFailLogsInternalsOnly: a 500's cause is logged with the route and
// operation, never sent; a refusal logs nothing; a request whose client
// left gets no answer.
func TestFailLogsInternalsOnly(t *testing.T) {
	t.Parallel()
	var logs testkit.Logs
	log := logs.Logger()
	req := httptest.NewRequest("GET", "/v1/prompts", nil)
	rec := httptest.NewRecorder()
	REST.Fail(rec, req, log, About("listing", errors.New("MARKER-cause")))
	if !logs.Contains("MARKER-cause") || !logs.Contains("op=listing") || strings.Contains(rec.Body.String(), "MARKER") {
		t.Errorf("logs %q, answer %s", logs.String(), rec.Body)
	}
	logs.Reset()
	REST.Fail(httptest.NewRecorder(), req, log, jobs.ErrNotFound)
	if logs.Len() != 0 {
		t.Errorf("a 404 was logged: %s", logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec = httptest.NewRecorder()
	REST.Fail(rec, req.WithContext(ctx), log, fmt.Errorf("waiting: %w", context.Canceled))
	if rec.Body.Len() != 0 || logs.Len() != 0 {
		t.Errorf("a departed client was answered %d %s", rec.Code, rec.Body)
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type req struct {
		A int `json:"a"`
	}
	for body, want := range map[string]string{
		`{"a":1}`:        "",
		`{"a":1} {}`:     "the body holds more than one JSON value",
		``:               "the body is empty; send a JSON object",
		`{"a":`:          "the JSON is cut off",
		`{"a":1,}`:       "malformed JSON at byte 8",
		`{"a":"x"}`:      "field a: expected int",
		`[]`:             "expected a JSON object",
		`{"b":"secret"}`: `json: unknown field "b"`,
	} {
		var v req
		err := DecodeStrict([]byte(body), &v)
		if want == "" {
			if err != nil || v.A != 1 {
				t.Errorf("%q: %v %+v", body, err, v)
			}
			continue
		}
		p, ok := errors.AsType[*Problem](err)
		if !ok || p.Status != http.StatusBadRequest || p.Code != "invalid_json" || p.Message != want {
			t.Errorf("%q: %v, want 400 invalid_json %q", body, err, want)
		}
	}
}

func TestParams(t *testing.T) {
	t.Parallel()
	get := func(q string) *http.Request { return httptest.NewRequest("GET", "/x?"+q, nil) }
	if n, err := Limit(get(""), 10); n != 0 || err != nil {
		t.Errorf("no limit: %d %v", n, err)
	}
	if n, err := Limit(get("limit=10"), 10); n != 10 || err != nil {
		t.Errorf("limit=10: %d %v", n, err)
	}
	for _, q := range []string{"limit=0", "limit=11", "limit=x"} {
		if _, err := Limit(get(q), 10); Classify(err).Param != "limit" {
			t.Errorf("%s: %v", q, err)
		}
	}
	if d, err := Wait(get("wait=5m"), time.Minute); d != time.Minute || err != nil {
		t.Errorf("wait capped: %v %v", d, err)
	}
	for _, q := range []string{"wait=-1s", "wait=soon"} {
		if _, err := Wait(get(q), time.Minute); Classify(err).Param != "wait" {
			t.Errorf("%s: %v", q, err)
		}
	}
	r := get("")
	r.Header.Set("Idempotency-Key", strings.Repeat("k", MaxIdempotencyKey+1))
	if _, err := IdempotencyKey(r); Classify(err).Status != 400 {
		t.Errorf("a long key: %v", err)
	}
}

// TestSSE: events, comments and the stream's headers as EventSource and
// OpenAI's SDKs read them.
func TestSSE(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	s, err := StartSSE(rec, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Comment("hello")
	_ = s.Event(7, "job.state_changed", []byte(`{"a":1}`))
	_ = s.Event(0, "", []byte("[DONE]"))
	_ = s.Flush()
	want := ": hello\n\nid: 7\nevent: job.state_changed\ndata: {\"a\":1}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want || rec.Header().Get("Content-Type") != "text/event-stream" || !rec.Flushed {
		t.Errorf("stream %q, headers %v", rec.Body, rec.Header())
	}
}
