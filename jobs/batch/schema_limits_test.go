package batch_test

import (
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
)

// TestSchemaOverLimitsFailsItsLine: a batch line whose response_format
// schema is nested 5,000 deep fails the batch naming the line and the
// parameter, at once, and nothing is enqueued.
func TestSchemaOverLimitsFailsItsLine(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"items":`, 4999) + `{}` + strings.Repeat(`}`, 4999)
	bad := strings.Replace(line("deep", "fast", "hi"), `]}}`,
		`],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":`+deep+`}}}}`, 1)
	e := newEnv(t, storekit.SQLite.New(t))
	b := e.create(line("g", "fast", "fine") + "\n" + bad + "\n")
	step(t, e.processor(e.st))
	got := e.wantStatus(b.ID, jobs.BatchFailed)
	if len(got.Errors) != 1 || got.Errors[0].Line != 2 || got.Errors[0].Param != "body.response_format.json_schema.schema" ||
		!strings.Contains(got.Errors[0].Message, "nested deeper than 64") {
		t.Fatalf("errors %+v, want line 2 naming the schema", got.Errors)
	}
	if n := len(e.results(b.ID)); n != 0 {
		t.Errorf("%d lines enqueued, want none", n)
	}
}
