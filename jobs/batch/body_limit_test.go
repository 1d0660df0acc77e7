package batch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/batch"
)

// The body limit of a batch line is the direct endpoint's: a line it
// would refuse with 413 is refused alone, naming the line, and the rest
// of the batch runs.
func TestOversizedLineIsRefusedAndTheOthersRun(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		// Over the default cap (1 MiB, the server's): the processor is
		// given no MaxBodyBytes.
		const marker = "ZEBRA-"
		huge := marker + strings.Repeat("x", 2*batch.DefaultMaxBodyBytes)
		b := e.createLines(line("big", "fast", huge), line("small", "fast", "hi"))
		p := e.processor(e.st)
		step(t, p)

		got := e.wantStatus(b.ID, jobs.BatchInProgress)
		rs := e.results(b.ID)
		if len(rs) != 1 || rs[0].Prompt.CustomID != "small" {
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.Prompt.CustomID)
			}
			t.Fatalf("jobs enqueued for %v, want only small's", ids)
		}
		if len(got.Errors) != 1 {
			t.Fatalf("batch errors %+v, want big's refusal", got.Errors)
		}
		be := got.Errors[0]
		if be.Code != batch.CodeTooLarge || be.Line != 1 || be.CustomID != "big" || be.Param != "body" {
			t.Errorf("refusal %+v, want %s on line 1, custom_id big, param body", be, batch.CodeTooLarge)
		}

		e.settle(map[string]string{"small": "ok"})
		step(t, p)
		got = e.wantStatus(b.ID, jobs.BatchCompleted)
		if want := (jobs.BatchCounts{Total: 2, Completed: 1, Failed: 1}); got.Counts != want {
			t.Errorf("counts %+v, want %+v", got.Counts, want)
		}
		out, inErr := e.outputs(got, []string{"big", "small"})
		if inErr["small"] || out["small"].Response == nil || out["small"].Response.StatusCode != 200 {
			t.Errorf("small: %+v (error file: %v), want its answer in the output file", out["small"], inErr["small"])
		}
		if !inErr["big"] || out["big"].Error == nil || out["big"].Error.Code != batch.CodeTooLarge || out["big"].Response != nil {
			t.Errorf("big: %+v (error file: %v), want a %s error in the error file", out["big"], inErr["big"], batch.CodeTooLarge)
		}

		// The error line's message names the line, never its content.
		var buf bytes.Buffer
		if err := e.st.ReadFile(context.Background(), "acme", got.ErrorFileID, &buf); err != nil {
			t.Fatal(err)
		}
		var el struct {
			ID    string                   `json:"id"`
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &el); err != nil {
			t.Fatalf("error file %q: %v", buf.String(), err)
		}
		if msg := el.Error.Message; !strings.Contains(msg, "Line 1") || !strings.Contains(msg, `"big"`) || strings.Contains(msg, marker) {
			t.Errorf("message %q: want it to name line 1 and custom_id big, and not to quote the body", msg)
		}
		if !strings.HasPrefix(el.ID, "batch_req_") {
			t.Errorf("error line id %q, want a batch_req_ id", el.ID)
		}
	})
}

// The cap is the configured one, measured on the line's body as sent: at
// the cap is accepted, a byte over is refused.
func TestBodyLimitIsConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storekit.SQLite.New(t))
	at := line("at", "fast", "q")
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(at), &m); err != nil {
		t.Fatal(err)
	}
	limit := int64(len(m["body"]))
	b := e.createLines(at, line("over", "fast", "qq"))
	step(t, e.processor(e.st, func(c *batch.Config) { c.MaxBodyBytes = limit }))
	got := e.wantStatus(b.ID, jobs.BatchInProgress)
	if rs := e.results(b.ID); len(rs) != 1 || rs[0].Prompt.CustomID != "at" {
		t.Errorf("%d lines enqueued, want only the one at the cap", len(rs))
	}
	if len(got.Errors) != 1 || got.Errors[0].CustomID != "over" || got.Errors[0].Code != batch.CodeTooLarge {
		t.Errorf("batch errors %+v, want over's refusal", got.Errors)
	}
}

// A refused line still takes part in validation: its custom_id must be
// unique, and so many refusals that the file is plainly wrong (more than
// MaxErrors), or any invalid line, fail the batch listing them.
func TestRefusedLinesAndValidation(t *testing.T) {
	t.Parallel()
	small := func(c *batch.Config) { c.MaxBodyBytes = 200 }
	big := strings.Repeat("x", 300)
	t.Run("duplicate custom_id", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, storekit.SQLite.New(t))
		b := e.createLines(line("a", "fast", big), line("a", "fast", "q"))
		step(t, e.processor(e.st, small))
		got := e.wantStatus(b.ID, jobs.BatchFailed)
		codes := []string{}
		for _, be := range got.Errors {
			codes = append(codes, fmt.Sprintf("%d:%s", be.Line, be.Code))
		}
		if want := fmt.Sprintf("[1:%s 2:%s]", batch.CodeTooLarge, batch.CodeDuplicate); fmt.Sprint(codes) != want {
			t.Errorf("errors %v, want %s", codes, want)
		}
	})
	t.Run("too many refused", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, storekit.SQLite.New(t))
		var ls []string
		for i := range batch.MaxErrors + 1 {
			ls = append(ls, line(fmt.Sprint(i), "fast", big))
		}
		b := e.createLines(append(ls, line("ok", "fast", "q"))...)
		step(t, e.processor(e.st, small))
		got := e.wantStatus(b.ID, jobs.BatchFailed)
		if len(got.Errors) != batch.MaxErrors || got.Errors[0].Code != batch.CodeTooLarge || got.Errors[0].Line != 1 {
			t.Errorf("%d errors, first %+v: want the first %d refusals", len(got.Errors), got.Errors[0], batch.MaxErrors)
		}
		if n := len(e.results(b.ID)); n != 0 {
			t.Errorf("a failed batch has %d lines enqueued", n)
		}
	})
}
