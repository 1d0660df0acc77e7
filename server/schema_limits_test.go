package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// TestSchemaLimits: a response_format schema nested 5,000 deep (issue 23:
// its compile kept a core busy for minutes) is refused at once with a 400
// naming the field, on both stores, and nothing is queued.
func TestSchemaLimits(t *testing.T) {
	deep := strings.Repeat(`{"items":`, 4999) + `{}` + strings.Repeat(`}`, 4999)
	const field = "response_format.json_schema.schema"
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		chat := `{"model":"default","messages":[{"role":"user","content":"hi"}],` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + deep + `}}}`
		r := e.call("POST", "/v1/chat/completions", "", chat)
		if er := r.oaErr(t); r.code != 400 || deref(er.Param) != field || !strings.Contains(er.Message, "nested deeper than 64") {
			t.Errorf("chat completion: %d %s", r.code, r.body)
		}
		// Patterns that would compile to millions of instructions: a 400
		// from the compile, which has a budget for them.
		huge := strings.Replace(chat, deep, `{"type":"string","pattern":"`+strings.Repeat("[a-z]{999}", 200)+`"}`, 1)
		if r := e.call("POST", "/v1/chat/completions", "", huge); r.code != 400 || !strings.Contains(r.oaErr(t).Message, "patterns too large") {
			t.Errorf("huge pattern: %d %s", r.code, r.body)
		}

		// POST /v1/prompts has no chat form: a chat body is refused for
		// its unknown key, before the schema is looked at.
		body, err := json.Marshal(map[string]any{"chat": jobs.ChatRequest{
			Messages:       []pktype.Message{{Role: pktype.RoleUser, Content: "hi"}},
			ResponseFormat: jobs.FormatJSONSchema, SchemaName: "x", Schema: json.RawMessage(deep),
		}})
		if err != nil {
			t.Fatal(err)
		}
		if r := e.call("POST", "/v1/prompts", "", body); r.code != 400 {
			t.Errorf("prompt with a chat body: %d %s", r.code, r.body)
		}

		page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
		if err != nil || len(page.Jobs) != 0 {
			t.Errorf("refused requests queued %d jobs (%v)", len(page.Jobs), err)
		}
	})
}
