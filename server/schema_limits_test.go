package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
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

// TestSchemaCostLimits: a schema within the shape limits but over what
// its compile may cost (issue 40: 1,500 patterns in 85 KB cost 0.44 s of
// CPU per request) is a 400 naming the field and the limit, quoting
// nothing of it (Responses names its own field), on both APIs and
// stores; a schema at every limit is admitted.
func TestSchemaCostLimits(t *testing.T) {
	anyOf := func(n int, item func(i int) string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = item(i)
		}
		return `{"anyOf":[` + strings.Join(items, ",") + `]}`
	}
	// "zqx" marks what an error must not quote.
	pattern := func(i int) string { return fmt.Sprintf(`{"type":"string","pattern":"^zqx%d$"}`, i) }
	class := func(i int) string { return fmt.Sprintf(`{"type":"string","pattern":"[%c-z]{999}zqx"}`, 'a'+i) } // 1,004 instructions
	id := func(i int) string { return fmt.Sprintf(`{"$id":"zqx%d","type":"string"}`, i) }
	over := []struct{ name, schema, words string }{
		{"patterns", anyOf(pktype.MaxSchemaPatterns+1, pattern), "has more than 256 distinct patterns"},
		{"regexp instructions", anyOf(10, class), "has patterns too large to compile (together over 10000 regexp instructions"},
		{"resources", anyOf(pktype.MaxSchemaResources+1, id), "has more than 64 $id, $anchor and $dynamicAnchor keywords"},
	}
	atCaps := anyOf(pktype.MaxSchemaPatterns, func(i int) string {
		if i < pktype.MaxSchemaResources {
			return fmt.Sprintf(`{"$id":"zqx%d","type":"string","pattern":"^zqx%d$"}`, i, i)
		}
		return pattern(i)
	})
	const field = "response_format.json_schema.schema"
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		for _, c := range over {
			chat := `{"model":"default","messages":[{"role":"user","content":"hi"}],` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + c.schema + `}}}`
			r := e.call("POST", "/v1/chat/completions", "", chat)
			if er := r.oaErr(t); r.code != 400 || deref(er.Param) != field || !strings.Contains(er.Message, c.words) || bytes.Contains(r.body, []byte("zqx")) {
				t.Errorf("chat completion over %s: %d %s", c.name, r.code, r.body)
			}
			response := `{"model":"default","input":"hi","background":true,"text":{"format":{"type":"json_schema","name":"x","schema":` + c.schema + `}}}`
			r = e.call("POST", "/v1/responses", "", response)
			if er := r.oaErr(t); r.code != 400 || deref(er.Param) != "text.format.schema" || !strings.Contains(er.Message, c.words) || bytes.Contains(r.body, []byte("zqx")) {
				t.Errorf("response over %s: %d %s", c.name, r.code, r.body)
			}
		}
		page, err := e.st.ListJobs(context.Background(), jobs.ListParams{})
		if err != nil || len(page.Jobs) != 0 {
			t.Fatalf("refused requests queued %d jobs (%v)", len(page.Jobs), err)
		}
		response := `{"model":"default","input":"hi","background":true,"text":{"format":{"type":"json_schema","name":"x","schema":` + atCaps + `}}}`
		if r := e.call("POST", "/v1/responses", "", response); r.code != 200 {
			t.Errorf("a schema at the limits: %d %s", r.code, r.body)
		}
	})
}

// BenchmarkSchemaRequest is the cost of a request whose schema is the
// costliest the limits admit (chains at the deepest, their levels holding
// as many $ids and distinct patterns as allowed; see
// BenchmarkCompileSchemaWorst), a new schema each time so that no compile
// is reused: decoding, the shape and cost checks, the compile at
// admission, and storing it. A background response: no model runs.
func BenchmarkSchemaRequest(b *testing.B) {
	const long = pktype.MaxSchemaDepth - 2 // below anyOf's object and array
	var chains []string
	for i := range (pktype.MaxSchemaNodes - 1) / long {
		var c strings.Builder
		for level := range long - 1 {
			k := i*long + level
			c.WriteString(`{`)
			if k < pktype.MaxSchemaResources {
				fmt.Fprintf(&c, `"$id":"r%d/",`, k)
			}
			if k < pktype.MaxSchemaPatterns {
				fmt.Fprintf(&c, `"pattern":"^[a-z]{%d}%d$",`, pktype.MaxSchemaRegexpCost/pktype.MaxSchemaPatterns-9, k)
			}
			c.WriteString(`"items":`)
		}
		chains = append(chains, c.String()+`{}`+strings.Repeat(`}`, long-1))
	}
	schema := `{"description":"%d","anyOf":[` + strings.Join(chains, ",") + `]}`
	for _, kind := range storekit.Kinds {
		b.Run(string(kind), func(b *testing.B) {
			st := kind.New(b).Open(b, jobs.Options{})
			eng := enginekit.Simulated(b)
			srv, err := New(Config{Store: st, Engine: eng, Addr: "127.0.0.1:0", SubmitRate: -1,
				Check: func(ctx context.Context, p jobs.EnqueueParams) error { return worker.Check(ctx, eng, p) }})
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Open(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { http.DefaultClient.CloseIdleConnections(); _ = srv.Close() })
			cpu := testkit.StartCPU()
			for i := 0; b.Loop(); i++ {
				body := `{"model":"default","input":"hi","background":true,"text":{"format":{"type":"json_schema","name":"x","schema":` +
					fmt.Sprintf(schema, i) + `}}}`
				res, err := http.Post(srv.URL()+"/v1/responses", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				msg, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("%d %.300s", res.StatusCode, msg)
				}
			}
			cpu.Report(b)
		})
	}
}
