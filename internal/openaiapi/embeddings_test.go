package openaiapi_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

func TestDecodeEmbeddings(t *testing.T) {
	t.Parallel()
	got, err := openaiapi.DecodeEmbeddings([]byte(`{"model":"m","input":["a","b"],"dimensions":8,"encoding_format":"base64","user":"u"}`))
	want := openaiapi.EmbeddingParams{Model: "m", Input: []string{"a", "b"}, Dimensions: new(8), Base64: true, User: "u"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v", got, err)
	}
	got, err = openaiapi.DecodeEmbeddings([]byte(`{"model":"m","input":"one","dimensions":null,"encoding_format":"float","user":null}`))
	if err != nil || !reflect.DeepEqual(got, openaiapi.EmbeddingParams{Model: "m", Input: []string{"one"}}) {
		t.Fatalf("%+v, %v", got, err)
	}
}

func TestDecodeEmbeddingsRefusals(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-text"
	for _, c := range []struct{ body, param, code string }{
		{`[]`, "", openaiapi.CodeInvalidJSON},
		{`{"input":"x"}`, "model", openaiapi.CodeMissingParameter},
		{`{"model":null,"input":"x"}`, "model", openaiapi.CodeMissingParameter},
		{`{"model":"","input":"x"}`, "model", openaiapi.CodeInvalidValue},
		{`{"model":"m"}`, "input", openaiapi.CodeMissingParameter},
		{`{"model":"m","input":""}`, "input", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":[]}`, "input", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":{"a":"` + secret + `"}}`, "input", openaiapi.CodeInvalidType},
		{`{"model":"m","input":[1,2,3]}`, "input", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":[[1,2],[3]]}`, "input", openaiapi.CodeUnsupportedValue},
		{`{"model":"m","input":["a",2]}`, "input[1]", openaiapi.CodeInvalidType},
		{`{"model":"m","input":["a",null]}`, "input[1]", openaiapi.CodeInvalidType},
		{`{"model":"m","input":["` + secret + `",""]}`, "input[1]", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","dimensions":0}`, "dimensions", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","dimensions":1.5}`, "dimensions", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","encoding_format":"` + secret + `"}`, "encoding_format", openaiapi.CodeInvalidValue},
		{`{"model":"m","input":"x","user":1}`, "user", openaiapi.CodeInvalidType},
		{`{"model":"m","input":"x","extra":1}`, "extra", openaiapi.CodeUnknownParameter},
		{`{"model":"m","input":"x","` + secret + ` ":1}`, "?", openaiapi.CodeUnknownParameter},
	} {
		_, err := openaiapi.DecodeEmbeddings([]byte(c.body))
		var re *jobs.RequestError
		if !errors.As(err, &re) || re.Param != c.param || re.Code != c.code || strings.Contains(re.Message, secret) {
			t.Errorf("%s: %#v", c.body, err)
		}
	}
	many := `{"model":"m","input":[` + strings.Repeat(`"x",`, pktype.MaxEmbeddingInputs) + `"x"]}`
	if _, err := openaiapi.DecodeEmbeddings([]byte(many)); err == nil {
		t.Error("more than 2048 inputs accepted")
	}
}

func TestEmbeddingsAnswer(t *testing.T) {
	t.Parallel()
	vs := [][]float64{{0.5, -0.25}, {1, 0}}
	u := pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 4}, Known: pktype.TokenUsagePresence{PromptTokens: true}}
	b, _ := json.Marshal(openaiapi.Embeddings(vs, "m", u, false))
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]},{"object":"embedding","index":1,"embedding":[1,0]}],"model":"m","usage":{"prompt_tokens":4,"total_tokens":4}}`
	if string(b) != want {
		t.Fatalf("%s", b)
	}
	// Unknown usage is left out, not zero.
	if b, _ := json.Marshal(openaiapi.Embeddings(vs, "m", pktype.Usage{}, false)); strings.Contains(string(b), "usage") {
		t.Fatalf("%s", b)
	}
	// base64 holds the float32 values, little-endian.
	l := openaiapi.Embeddings(vs, "m", u, true)
	raw, err := base64.StdEncoding.DecodeString(l.Data[0].Embedding.(string))
	if err != nil || len(raw) != 8 || math.Float32frombits(binary.LittleEndian.Uint32(raw[4:])) != -0.25 {
		t.Fatalf("base64 %v %v", l.Data[0].Embedding, err)
	}
}

// FuzzDecodeEmbeddings: any body either decodes to a request the engine
// takes (a model, 1 to 2048 non-empty texts, positive dimensions), or is
// refused with a *RequestError that has a message and names a parameter
// only as a parameter name; the same body always gets the same answer.
func FuzzDecodeEmbeddings(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","input":["a","b"],"dimensions":3,"encoding_format":"base64","user":"u"}`))
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]]}`))
	f.Add([]byte(`{"model":"m","input":["a",""],"x":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := openaiapi.DecodeEmbeddings(body)
		again, err2 := openaiapi.DecodeEmbeddings(body)
		if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			var re, re2 *jobs.RequestError
			if !errors.As(err, &re) || !errors.As(err2, &re2) || re.Message == "" || *re != *re2 {
				t.Fatalf("error %#v / %#v", err, err2)
			}
			return
		}
		if got.Model == "" || len(got.Input) == 0 || len(got.Input) > pktype.MaxEmbeddingInputs {
			t.Fatalf("decoded %+v", got)
		}
		for _, s := range got.Input {
			if s == "" {
				t.Fatal("decoded an empty input")
			}
		}
		if got.Dimensions != nil && *got.Dimensions < 1 {
			t.Fatalf("dimensions %d", *got.Dimensions)
		}
	})
}

// A NUL in an input is refused on POST /v1/embeddings as in a batch line,
// naming the input and never quoting it.
func TestDecodeEmbeddingsRefusesNUL(t *testing.T) {
	t.Parallel()
	_, err := openaiapi.DecodeEmbeddings([]byte(`{"model":"m","input":["fine","SECRET\u0000"]}`))
	var re *jobs.RequestError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Param, "input") || strings.Contains(re.Message, "SECRET") {
		t.Fatalf("got %v", err)
	}
}
