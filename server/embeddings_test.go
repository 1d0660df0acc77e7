package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/providertest"
)

type embeddingList struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// withProvider runs the server's engine on a providertest fake that the
// test scripts, with retries transient retries inside a request.
func withProvider(t *testing.T, retries int) (*providertest.Server, option) {
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	eng := enginekit.Provider(t, srv.URL, enginekit.Retries(retries))
	return srv, func(c *Config) { c.Engine = eng }
}

// TestEmbeddings: the simulated engine's vectors, in input order, with
// the provider's usage; no job is stored.
func TestEmbeddings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.call("POST", "/v1/embeddings", "sk-anything", `{"model":"default","input":["hello there","hi"],"user":"u"}`)
	var l embeddingList
	r.decode(t, &l)
	if r.code != 200 || l.Object != "list" || l.Model != "promptkit-simulated" || len(l.Data) != 2 || l.Usage == nil || l.Usage.PromptTokens != 3 || l.Usage.TotalTokens != 3 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	for i, text := range []string{"hello there", "hi"} {
		var v []float64
		if err := json.Unmarshal(l.Data[i].Embedding, &v); err != nil || l.Data[i].Index != i || l.Data[i].Object != "embedding" || !reflect.DeepEqual(v, providertest.EmbeddingFor(text, 0)) {
			t.Errorf("data[%d]: %s (%v)", i, l.Data[i].Embedding, err)
		}
	}
	if r.header.Get(headerJobID) != "" {
		t.Errorf("an embedding is not a job: %v", r.header)
	}
	if page, err := e.st.ListJobs(t.Context(), jobs.ListParams{JobFilter: jobs.JobFilter{OrgID: "default"}}); err != nil || len(page.Jobs) != 0 {
		t.Errorf("stored %d jobs (%v)", len(page.Jobs), err)
	}
	// Its provider call is in the usage ledger all the same, the org's and
	// user's (no price here: its cost is unknown).
	got, err := e.st.Usage(t.Context(), jobs.UsageParams{GroupBy: []jobs.UsageGroup{jobs.UsageByOrg, jobs.UsageByUser}})
	if err != nil || len(got) != 1 || got[0].OrgID != "default" || got[0].UserID != "local" || got[0].Requests != 1 ||
		got[0].InputTokens != 3 || got[0].UnknownUsage != 0 || got[0].UnknownCost != 1 {
		t.Errorf("usage after the embeddings call: %+v (%v)", got, err)
	}

	// A model some profile uses resolves like a chat model; base64 holds
	// the same float32 values; dimensions reach the backend.
	r = e.call("POST", "/v1/embeddings", "", `{"model":"promptkit-simulated","input":"hi","dimensions":5,"encoding_format":"base64"}`)
	r.decode(t, &l)
	var enc string
	if r.code != 200 || len(l.Data) != 1 || json.Unmarshal(l.Data[0].Embedding, &enc) != nil {
		t.Fatalf("base64: %d %s", r.code, r.body)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	want := providertest.EmbeddingFor("hi", 5)
	if err != nil || len(raw) != 4*len(want) {
		t.Fatalf("base64 %q: %v", enc, err)
	}
	for i, w := range want {
		if got := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))); got != w {
			t.Errorf("value %d: %v, want %v", i, got, w)
		}
	}
}

func TestEmbeddingsRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		body        string
		status      int
		param, code string
	}{
		{`{"model":"default","input":[1,2,3]}`, 400, "input", openaiapi.CodeUnsupportedValue},
		{`{"model":"default","input":["a",""]}`, 400, "input[1]", openaiapi.CodeInvalidValue},
		{`{"model":"default","input":"a","dimensions":0}`, 400, "dimensions", openaiapi.CodeInvalidValue},
		{`{"model":"default","input":"a","encoding_format":"int8"}`, 400, "encoding_format", openaiapi.CodeInvalidValue},
		{`{"model":"default","input":"a","stream":true}`, 400, "stream", openaiapi.CodeUnknownParameter},
		{`{"model":"default"}`, 400, "input", openaiapi.CodeMissingParameter},
		{`{"model":"gpt-x","input":"a"}`, 404, "model", "model_not_found"},
		{`{`, 400, "", openaiapi.CodeInvalidJSON},
	} {
		r := e.call("POST", "/v1/embeddings", "", c.body)
		er := r.oaErr(t)
		if r.code != c.status || deref(er.Param) != c.param && c.param != "" || deref(er.Code) != c.code {
			t.Errorf("%s: %d %s", c.body, r.code, r.body)
		}
	}
}

func TestEmbeddingsAuthAndRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.SubmitRate, c.SubmitBurst = 0.001, 1 })
	tok := e.token("acme", "ann", jobs.RoleMember)
	body := `{"model":"default","input":"a"}`
	for _, bad := range []string{"", "sk-proj-abc"} {
		if r := e.call("POST", "/v1/embeddings", bad, body); r.code != 401 || deref(r.oaErr(t).Code) != "invalid_api_key" {
			t.Errorf("token %q: %d %s", bad, r.code, r.body)
		}
	}
	if r := e.call("POST", "/v1/embeddings", tok, body); r.code != 200 {
		t.Fatalf("valid token: %d %s", r.code, r.body)
	}
	r := e.call("POST", "/v1/embeddings", tok, body)
	if er := r.oaErr(t); r.code != 429 || er.Type != openaiapi.TypeRateLimit || r.header.Get("Retry-After") == "" {
		t.Fatalf("over the submission rate: %d %v %s", r.code, r.header, r.body)
	}
}

// TestEmbeddingsProviderErrors: a provider failure that survives the
// engine's retries is answered as a failed chat job's would be.
func TestEmbeddingsProviderErrors(t *testing.T) {
	t.Parallel()
	srv, opt := withProvider(t, 0)
	e := setup(t, opt)
	// The 429 comes last: its Retry-After pauses the backend, and the
	// requests after it would wait that out.
	srv.Enqueue(
		providertest.Status(503),
		providertest.Status(400),
		providertest.Malformed(),
		providertest.Status(401),
		providertest.Status(429).WithRetryAfter("30"),
	)
	body := `{"model":"default","input":"` + secretMarker + `"}`
	for _, c := range []struct {
		status    int
		typ, code string
	}{
		{502, openaiapi.TypeServer, string(jobs.KindProvider5xx)},
		{400, openaiapi.TypeInvalidRequest, string(jobs.KindProvider4xx)},
		{502, openaiapi.TypeServer, string(jobs.KindParse)},
		{502, openaiapi.TypeServer, string(jobs.KindAuth)},
		{429, openaiapi.TypeRateLimit, "rate_limit_exceeded"},
	} {
		r := e.call("POST", "/v1/embeddings", "", body)
		er := r.oaErr(t)
		if r.code != c.status || er.Type != c.typ || deref(er.Code) != c.code || strings.Contains(er.Message, secretMarker) {
			t.Errorf("want %d %s: %d %s", c.status, c.code, r.code, r.body)
		}
		if c.status == 429 {
			// The provider's Retry-After, counted from its answer: at most
			// its 30 s, and more than what a guess of 1 s would be.
			if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 2 || s > 30 {
				t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
			}
		}
	}
	if strings.Contains(e.logs.String(), secretMarker) {
		t.Errorf("the input is in the logs:\n%s", e.logs)
	}
}

const secretMarker = "MARKER-embed-5d1e-do-not-log"

// TestEmbeddingsRetryAfterBeyondTheTimeout: a Retry-After past the
// server's timeout is not waited for: the answer is a 429 at once with the
// provider's delay, and the backend's pause refuses the next request the
// same way without calling the provider.
func TestEmbeddingsRetryAfterBeyondTheTimeout(t *testing.T) {
	t.Parallel()
	srv, opt := withProvider(t, 2)
	e := setup(t, opt)
	srv.Enqueue(providertest.Status(429).WithRetryAfter("3600"))
	body := `{"model":"default","input":"a"}`
	for i := range 2 {
		r := e.call("POST", "/v1/embeddings", "", body)
		s, err := strconv.Atoi(r.header.Get("Retry-After"))
		if r.code != 429 || deref(r.oaErr(t).Code) != "rate_limit_exceeded" || err != nil || s <= int(DefaultChatTimeout.Seconds()) {
			t.Fatalf("request %d: %d %v %s", i+1, r.code, r.header, r.body)
		}
	}
	if srv.Count() != 1 {
		t.Fatalf("the provider was called %d times, want once", srv.Count())
	}
}

// TestEmbeddingsRetriedWithinTheRequest: transient failures are retried
// by the engine, so the client sees the answer.
func TestEmbeddingsRetriedWithinTheRequest(t *testing.T) {
	t.Parallel()
	srv, opt := withProvider(t, 2)
	e := setup(t, opt)
	// Retry-After 0: the retry waits only the engine's backoff.
	srv.Enqueue(providertest.Status(503).WithRetryAfter("0"))
	r := e.call("POST", "/v1/embeddings", "", `{"model":"default","input":"a"}`)
	if r.code != 200 || srv.Count() != 2 {
		t.Fatalf("%d after %d calls: %s", r.code, srv.Count(), r.body)
	}
}

// TestEmbeddingSchemasFitTheGoTypes: the request schema accepts what the
// decoder accepts, and both refuse token arrays; the answer schema takes
// an answer without usage.
func TestEmbeddingSchemasFitTheGoTypes(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"model":"m","input":"x","dimensions":3,"encoding_format":"base64","user":"u"}`,
		`{"model":"m","input":["x","y"],"dimensions":null,"encoding_format":null,"user":null}`,
	} {
		if err := oasValidate(t, "/components/schemas/EmbeddingRequest", []byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
		if _, err := openaiapi.DecodeEmbeddings([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	for _, body := range []string{
		`{"model":"m","input":[1,2]}`,
		`{"model":"m","input":""}`,
		`{"model":"m","input":"x","extra":1}`,
	} {
		if oasValidate(t, "/components/schemas/EmbeddingRequest", []byte(body)) == nil {
			t.Errorf("EmbeddingRequest accepts %s", body)
		}
		if _, err := openaiapi.DecodeEmbeddings([]byte(body)); err == nil {
			t.Errorf("DecodeEmbeddings accepts %s", body)
		}
	}
	b, _ := json.Marshal(openaiapi.Embeddings([][]float64{{1, 0}}, "m", pktype.Usage{}, true))
	if err := oasValidate(t, "/components/schemas/EmbeddingList", b); err != nil {
		t.Errorf("%s: %v", b, err)
	}
}
