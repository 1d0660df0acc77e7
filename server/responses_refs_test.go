package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// refsInput is an input of n item references to ids, in turn, then a
// user message (which makes each request a new one).
func refsInput(ids []string, n int, text string) string {
	var b strings.Builder
	b.WriteString(`[`)
	for i := range n {
		fmt.Fprintf(&b, `{"type":"item_reference","id":%q},`, ids[i%len(ids)])
	}
	fmt.Fprintf(&b, `{"role":"user","content":%q}]`, text)
	return b.String()
}

// storeResponses makes n background responses, each of the input
// messages texts, and returns the id of each one's input item k (as
// GET /v1/responses/{id}/input_items names it).
func storeResponses(t testing.TB, do func(method, path, body string) resp, n int, texts []string, k int) []string {
	t.Helper()
	msgs := make([]string, len(texts))
	for j, s := range texts {
		msgs[j] = fmt.Sprintf(`{"role":"user","content":%q}`, s)
	}
	ids := make([]string, n)
	for i := range ids {
		r := do("POST", "/v1/responses", `{"model":"default","background":true,"input":[`+strings.Join(msgs, ",")+`]}`)
		if r.code != http.StatusOK {
			t.Fatalf("response %d: %d %.300s", i, r.code, r.body)
		}
		var items openaiapi.List[openaiapi.OutputItem]
		r = do("GET", "/v1/responses/"+openaiapi.ResponseID(r.header.Get(headerPromptID))+"/input_items?order=asc", "")
		if r.decode(t, &items); len(items.Data) != len(texts) {
			t.Fatalf("input items: %.300s", r.body)
		}
		ids[i] = items.Data[k].ID
	}
	return ids
}

// TestResponsesReferenceLimits: item references are bounded in number
// (openaiapi.MaxItemReferences), in the responses they name
// (MaxReferencedResponses) and in what they stand for (the body limit),
// each a 400 naming the limit that quotes nothing of the request (issue
// 40: 13,100 references took 11.5 s on PostgreSQL and stored a 576 KB
// prompt), and nothing is queued; at every limit a request is admitted.
func TestResponsesReferenceLimits(t *testing.T) {
	const maxBody = 256 << 10
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		do := func(method, path, body string) resp { return e.call(method, path, "", body) }
		call := func(body string) resp { return do("POST", "/v1/responses", body) }
		// Responses whose input is a small message, then a large one
		// (a quarter of the body limit; "zqx" marks the content).
		large := strings.Repeat("zqx ", maxBody/16)
		ids := storeResponses(t, do, openaiapi.MaxReferencedResponses+1, []string{"zqx small", large}, 0)
		largeIDs := storeResponses(t, do, 1, []string{"zqx small", large}, 1)

		refused := func(name, input, words string) {
			t.Helper()
			r := call(`{"model":"default","background":true,"input":` + input + `}`)
			if er := r.oaErr(t); r.code != 400 || deref(er.Param) != "input" || !strings.Contains(er.Message, words) ||
				bytes.Contains(r.body, []byte("zqx")) || bytes.Contains(r.body, []byte("msg_")) {
				t.Errorf("%s: %d %s", name, r.code, r.body)
			}
		}
		admitted := func(name, input string) {
			t.Helper()
			if r := call(`{"model":"default","background":true,"input":` + input + `}`); r.code != 200 {
				t.Errorf("%s: %d %.300s", name, r.code, r.body)
			}
		}
		refused("references", refsInput(ids[:1], openaiapi.MaxItemReferences+1, "over"),
			fmt.Sprintf("input holds more than %d item references", openaiapi.MaxItemReferences))
		refused("responses", refsInput(ids, len(ids), "over"),
			fmt.Sprintf("input refers to items of more than %d responses", openaiapi.MaxReferencedResponses))
		refused("size", refsInput(largeIDs, 5, "over"), fmt.Sprintf("stand for more than %d bytes", maxBody))
		page, err := e.st.ListJobs(context.Background(), jobs.ListParams{Limit: 1000})
		if err != nil || len(page.Jobs) != len(ids)+1 {
			t.Fatalf("%d jobs (%v), want only the %d responses made", len(page.Jobs), err, len(ids)+1)
		}

		admitted("references and responses at their limits",
			refsInput(ids[:openaiapi.MaxReferencedResponses], openaiapi.MaxItemReferences, "at the limits"))
		admitted("size at the limit", refsInput(largeIDs, 4, "at the limit"))
	}, func(c *Config) { c.MaxBodyBytes = maxBody })
}

// TestResponsesReferencesReadTogether: however many references a request
// makes, its responses are read in one query for the prompts and one for
// the answers, and each one's jobs once.
func TestResponsesReferencesReadTogether(t *testing.T) {
	t.Parallel()
	raw := storekit.SQLite.New(t).Open(t, jobs.Options{})
	st := storekit.Count(raw)
	e := setupStore(t, st)
	e.runWorker(func(c *worker.Config) { c.Store = raw }) // its reads are not the request's
	do := func(method, path, body string) resp { return e.call(method, path, "", body) }
	call := func(body string) resp { return do("POST", "/v1/responses", body) }
	// Answered responses: each one's output message can be named too.
	var outIDs []string
	for i := range openaiapi.MaxReferencedResponses / 2 {
		r, o := e.createResponse(fmt.Sprintf(`{"model":"default","input":"hello %d"}`, i))
		if r.code != 200 || len(o.Output) == 0 {
			t.Fatalf("response: %d %s", r.code, r.body)
		}
		outIDs = append(outIDs, o.Output[0].ID)
	}
	ids := storeResponses(t, do, openaiapi.MaxReferencedResponses/2, []string{"a", "b"}, 1)
	// What a request with references reads beyond what one without does.
	reads := func(input string) map[string]int {
		st.Take()
		if r := call(`{"model":"default","background":true,"input":` + input + `}`); r.code != 200 {
			t.Fatalf("%d %s", r.code, r.body)
		}
		return st.Take()
	}
	base := reads(`"no references"`)
	with := reads(refsInput(append(ids, outIDs...), 600, "together"))
	for name, want := range map[string]int{"GetPrompt": 0, "GetPrompts": 1, "GetResponse": 0, "GetResponses": 1, "PromptJobs": openaiapi.MaxReferencedResponses} {
		if with[name]-base[name] != want {
			t.Errorf("%s: %d calls more, want %d (with references %v, without %v)", name, with[name]-base[name], want, with, base)
		}
	}
}

// BenchmarkResponsesReferences is the cost of a request at the reference
// limits at its worst: MaxItemReferences references spread over
// MaxReferencedResponses responses, each as large as a body may be, so
// that every read is as large as it can be (references to each one's
// small item keep what they stand for under the body limit); beside it,
// the same request with the items sent instead. Background requests:
// what is measured is the front door (and the client), not a model.
func BenchmarkResponsesReferences(b *testing.B) {
	for _, kind := range storekit.Kinds {
		b.Run(string(kind), func(b *testing.B) {
			st := kind.New(b).Open(b, jobs.Options{})
			srv, err := New(Config{Store: st, Engine: enginekit.Simulated(b), Addr: "127.0.0.1:0", SubmitRate: -1})
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Open(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { http.DefaultClient.CloseIdleConnections(); _ = srv.Close() })
			do := func(method, path, body string) resp {
				req, err := http.NewRequest(method, srv.URL()+path, strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer res.Body.Close()
				var buf bytes.Buffer
				_, _ = buf.ReadFrom(res.Body)
				return resp{code: res.StatusCode, header: res.Header, body: buf.Bytes()}
			}
			large := strings.Repeat("x", DefaultMaxBodyBytes-1024)
			ids := storeResponses(b, do, openaiapi.MaxReferencedResponses, []string{"small", large}, 0)
			for _, c := range []struct {
				name  string
				input func(i int) string
			}{
				{"references_at_limits", func(i int) string {
					return refsInput(ids, openaiapi.MaxItemReferences, fmt.Sprint("request ", i))
				}},
				{"items_sent", func(i int) string {
					return "[" + strings.Repeat(`{"role":"user","content":"small"},`, openaiapi.MaxItemReferences) +
						fmt.Sprintf(`{"role":"user","content":"request %d"}]`, i)
				}},
			} {
				b.Run(c.name, func(b *testing.B) {
					cpu := testkit.StartCPU()
					for i := 0; b.Loop(); i++ {
						if r := do("POST", "/v1/responses", `{"model":"default","background":true,"input":`+c.input(i)+`}`); r.code != 200 {
							b.Fatalf("%d %.300s", r.code, r.body)
						}
					}
					cpu.Report(b)
				})
			}
		})
	}
}
