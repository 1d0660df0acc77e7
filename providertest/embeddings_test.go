package providertest_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

// embeddingAnswer is OpenAI's embeddings answer with float vectors.
type embeddingAnswer struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string          `json:"model"`
	Usage json.RawMessage `json:"usage"`
}

func decodeEmbeddings(t *testing.T, r result) embeddingAnswer {
	t.Helper()
	var a embeddingAnswer
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	return a
}

func floats(t *testing.T, raw json.RawMessage) []float64 {
	t.Helper()
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("embedding %s: %v", raw, err)
	}
	return v
}

func TestEmbeddingsDefault(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a := decodeEmbeddings(t, post(t, s.URL+"/embeddings", `{"model":"emb","input":["hello there","hi"],"user":"u"}`))
	if a.Object != "list" || a.Model != "emb" || len(a.Data) != 2 || string(a.Usage) != `{"prompt_tokens":3,"total_tokens":3}` {
		t.Fatalf("answer %+v", a)
	}
	for i, text := range []string{"hello there", "hi"} {
		d := a.Data[i]
		v := floats(t, d.Embedding)
		if d.Object != "embedding" || d.Index != i || !reflect.DeepEqual(v, providertest.EmbeddingFor(text, 0)) || len(v) != providertest.DefaultEmbeddingDimensions {
			t.Errorf("data[%d] %+v", i, d)
		}
		var norm float64
		for _, x := range v {
			norm += x * x
		}
		if math.Abs(norm-1) > 1e-6 {
			t.Errorf("data[%d] has length %v, want 1", i, math.Sqrt(norm))
		}
	}
	if reflect.DeepEqual(a.Data[0].Embedding, a.Data[1].Embedding) {
		t.Error("different texts, equal vectors")
	}
	// The same text gets the same vector on every request; one string is
	// one input; dimensions are honoured, with a prefix of nothing shared.
	b := decodeEmbeddings(t, post(t, s.URL+"/v1/embeddings", `{"model":"emb","input":"hi","dimensions":3}`))
	if len(b.Data) != 1 || !reflect.DeepEqual(floats(t, b.Data[0].Embedding), providertest.EmbeddingFor("hi", 3)) {
		t.Fatalf("one string with dimensions: %+v", b)
	}
	if got := s.Requests()[0].Input; !reflect.DeepEqual(got, []string{"hello there", "hi"}) {
		t.Errorf("recorded input %q", got)
	}
	if st := s.Stats(); st.Defaults != 2 || st.Requests != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestEmbeddingsBase64IsTheFloats(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.WithModel("fixed"))
	a := decodeEmbeddings(t, post(t, s.URL+"/embeddings", `{"model":"emb","input":[[1,2,3]],"encoding_format":"base64","dimensions":40}`))
	var enc string
	if err := json.Unmarshal(a.Data[0].Embedding, &enc); err != nil {
		t.Fatalf("not a base64 string: %s", a.Data[0].Embedding)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(raw) != 4*40 {
		t.Fatalf("base64 %q: %v", enc, err)
	}
	want := providertest.EmbeddingFor("[1,2,3]", 40)
	for i := range want {
		if got := float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))); got != want[i] {
			t.Fatalf("value %d: %v, want %v", i, got, want[i])
		}
	}
	if a.Model != "fixed" || string(a.Usage) != `{"prompt_tokens":3,"total_tokens":3}` {
		t.Fatalf("model %q, usage %s (a token array counts its tokens)", a.Model, a.Usage)
	}
}

func TestEmbeddingsRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, c := range []struct{ body, param string }{
		{`{"input":"x"}`, "model"},
		{`{"model":"m"}`, "input"},
		{`{"model":"m","input":""}`, "input"},
		{`{"model":"m","input":[]}`, "input"},
		{`{"model":"m","input":["a",""]}`, "input"},
		{`{"model":"m","input":[1.5]}`, "input"},
		{`{"model":"m","input":{"a":1}}`, "input"},
		{`{"model":"m","input":"x","dimensions":0}`, "dimensions"},
		{`{"model":"m","input":"x","dimensions":1.5}`, "dimensions"},
		{`{"model":"m","input":"x","dimensions":100000}`, "dimensions"},
		{`{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format"},
		{`[]`, ""},
	} {
		r := post(t, s.URL+"/embeddings", c.body)
		var e struct {
			Error struct {
				Type  string  `json:"type"`
				Param *string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &e)
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if r.status != 400 || e.Error.Type != "invalid_request_error" || param != c.param {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
	if r := do405(t, s.URL+"/embeddings"); r != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", r)
	}
}

func do405(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEmbeddingsScripted: the script answers embeddings requests as it
// answers chat ones, in arrival order across both.
func TestEmbeddingsScripted(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.Enqueue(
		providertest.Status(429).WithRetryAfter("3"),
		providertest.Status(503),
		providertest.Response{Usage: providertest.Usage{Mode: providertest.UsageAbsent}},
		providertest.Response{Usage: providertest.Usage{PromptTokens: 7, TotalTokens: 9}},
		providertest.MissingChoices(),
		providertest.Reply("a chat reply"),
	)
	url := s.URL + "/embeddings"
	body := `{"model":"m","input":"one two"}`
	if r := post(t, url, body); r.status != 429 || r.header.Get("Retry-After") != "3" || !strings.Contains(string(r.body), "rate_limit_error") {
		t.Fatalf("429: %d %v %s", r.status, r.header, r.body)
	}
	if r := post(t, url, body); r.status != 503 {
		t.Fatalf("503: %d %s", r.status, r.body)
	}
	if a := decodeEmbeddings(t, post(t, url, body)); a.Usage != nil || len(a.Data) != 1 {
		t.Fatalf("usage absent: %+v", a)
	}
	if a := decodeEmbeddings(t, post(t, url, body)); string(a.Usage) != `{"prompt_tokens":7,"total_tokens":9}` {
		t.Fatalf("scripted usage: %s", a.Usage)
	}
	if a := decodeEmbeddings(t, post(t, url, body)); a.Data != nil {
		t.Fatalf("missing data: %+v", a)
	}
	if r := post(t, s.URL+"/chat/completions", chatBody); r.content(t) != "a chat reply" {
		t.Fatalf("chat after embeddings: %s", r.body)
	}
	if st := s.Stats(); st.Scripted != 6 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEmbeddingsRateLimited(t *testing.T) {
	t.Parallel()
	clock := newClock()
	s := newServer(t, providertest.WithRateLimit(1), providertest.WithClock(clock.Now))
	body := `{"model":"m","input":"x"}`
	if r := post(t, s.URL+"/embeddings", body); r.status != 200 {
		t.Fatalf("first: %d", r.status)
	}
	r := post(t, s.URL+"/embeddings", body)
	if r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("second: %d %v", r.status, r.header)
	}
	if s.Stats().RateLimited != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

func TestEmbeddingForIsStable(t *testing.T) {
	t.Parallel()
	// A fixed value: the vectors must not change across releases, since
	// tests elsewhere may compare them.
	v := providertest.EmbeddingFor("promptkit", 4)
	if len(v) != 4 || v[0] == 0 || !reflect.DeepEqual(v, providertest.EmbeddingFor("promptkit", 4)) {
		t.Fatalf("%v", v)
	}
	if got := providertest.EmbeddingFor("x", -1); len(got) != providertest.DefaultEmbeddingDimensions {
		t.Fatalf("default length %d", len(got))
	}
}
