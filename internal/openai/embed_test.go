package openai

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

const embedOK = `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5,-1]},{"object":"embedding","index":0,"embedding":[0.25,2e-3]}],"model":"emb-1","usage":{"prompt_tokens":4,"total_tokens":4}}`

func embedRequest() pktype.EmbeddingRequest {
	return pktype.EmbeddingRequest{Model: "emb", Input: []string{"a <b>", "c"}}
}

func b64(vals ...float32) string {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestEmbeddingRequestOnTheWire(t *testing.T) {
	t.Parallel()
	var got captured
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got.path, got.header = r.URL.Path, r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got.body)
		if !strings.Contains(string(b), `"a <b>"`) {
			t.Errorf("input not byte-identical: %s", b)
		}
		_, _ = io.WriteString(w, embedOK)
	})
	req := embedRequest()
	req.Dimensions, req.EncodingFormat = new(2), pktype.EncodingFloat
	f, err := PrepareEmbedding(Endpoint{BackendID: "b", BaseURL: srv.URL + "/v1/", APIKeyEnv: "K", Getenv: func(string) string { return " sk-1\n" }}, req)
	if err != nil {
		t.Fatal(err)
	}
	out := f.Execute(context.Background())
	if out.Err != nil || out.Response != nil {
		t.Fatalf("outcome %+v", out)
	}
	want := map[string]any{"model": "emb", "input": []any{"a <b>", "c"}, "dimensions": 2.0, "encoding_format": "float"}
	if got.path != "/v1/embeddings" || got.header.Get("Authorization") != "Bearer sk-1" || !reflect.DeepEqual(got.body, want) {
		t.Fatalf("sent %s %v %v", got.path, got.header, got.body)
	}
	e := out.Embedding
	if !reflect.DeepEqual(e.Vectors, [][]float64{{0.25, 0.002}, {0.5, -1}}) || e.Model != "emb-1" {
		t.Fatalf("decoded %+v", e)
	}
	wantP := pktype.TokenUsagePresence{PromptTokens: true, TotalTokens: true}
	if out.Usage.PromptTokens != 4 || out.Usage.TotalTokens != 4 || out.Presence != wantP || e.Presence() != wantP {
		t.Fatalf("usage %+v %+v", out.Usage, out.Presence)
	}
}

func TestEmbeddingErrorStatusAndRetryAfter(t *testing.T) {
	t.Parallel()
	secret := "input text the provider echoes"
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"`+secret+`","type":"rate_limit_error"}}`)
	})
	received := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f, err := PrepareEmbedding(Endpoint{BackendID: "b", BaseURL: srv.URL, Now: func() time.Time { return received }}, embedRequest())
	if err != nil {
		t.Fatal(err)
	}
	out := f.Execute(context.Background())
	var ge *pktype.GenerationError
	if !errors.As(out.Err, &ge) || ge.StatusCode() != 429 || !out.NotBefore.Equal(received.Add(7*time.Second)) {
		t.Fatalf("outcome %+v", out)
	}
	if strings.Contains(out.Err.Error(), secret) {
		t.Fatalf("error quotes the provider: %v", out.Err)
	}
}

func TestPrepareEmbeddingRefuses(t *testing.T) {
	t.Parallel()
	ep := Endpoint{BaseURL: "http://127.0.0.1:1/v1"}
	for name, mod := range map[string]func(*pktype.EmbeddingRequest){
		"no model":      func(r *pktype.EmbeddingRequest) { r.Model = "" },
		"no input":      func(r *pktype.EmbeddingRequest) { r.Input = nil },
		"empty input":   func(r *pktype.EmbeddingRequest) { r.Input = []string{"a", ""} },
		"too many":      func(r *pktype.EmbeddingRequest) { r.Input = make([]string, pktype.MaxEmbeddingInputs+1) },
		"zero dims":     func(r *pktype.EmbeddingRequest) { r.Dimensions = new(0) },
		"bad encoding":  func(r *pktype.EmbeddingRequest) { r.EncodingFormat = "int8" },
		"bad base url":  func(*pktype.EmbeddingRequest) {},
		"missing creds": func(*pktype.EmbeddingRequest) {},
	} {
		req := embedRequest()
		mod(&req)
		e := ep
		switch name {
		case "bad base url":
			e.BaseURL = "ftp://x"
		case "missing creds":
			e.APIKeyEnv, e.Getenv = "K", func(string) string { return "" }
		}
		_, err := PrepareEmbedding(e, req)
		if !errors.Is(err, pktype.ErrInvalidRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEmbeddingResponseLimitGrowsWithInputs(t *testing.T) {
	t.Parallel()
	req := embedRequest()
	req.Input = make([]string, 100)
	for i := range req.Input {
		req.Input[i] = "x"
	}
	f, err := PrepareEmbedding(Endpoint{BaseURL: "http://h/v1"}, req)
	if err != nil {
		t.Fatal(err)
	}
	if f.maxBytes != 100*embeddingBytesPerInput {
		t.Fatalf("limit %d", f.maxBytes)
	}
	f, _ = PrepareEmbedding(Endpoint{BaseURL: "http://h/v1", MaxResponseBytes: 10}, req)
	if f.maxBytes != 10 {
		t.Fatalf("a set limit is kept: %d", f.maxBytes)
	}
}

func TestDecodeEmbedding(t *testing.T) {
	t.Parallel()
	two := 2
	for _, c := range []struct {
		name   string
		body   string
		inputs int
		dims   *int
		want   [][]float64
		err    error
	}{
		{"floats by index", embedOK, 2, nil, [][]float64{{0.25, 0.002}, {0.5, -1}}, nil},
		{"base64", `{"data":[{"index":0,"embedding":"` + b64(0.5, -2) + `"}]}`, 1, &two, [][]float64{{0.5, -2}}, nil},
		{"no index: input order", `{"data":[{"embedding":[1]},{"embedding":[2]}]}`, 2, nil, [][]float64{{1}, {2}}, nil},
		{"any count", `{"data":[{"embedding":[1]}]}`, 0, nil, [][]float64{{1}}, nil},
		{"not an object", `[]`, 1, nil, nil, errNotObject},
		{"trailing", embedOK + `x`, 2, nil, nil, errTrailingData},
		{"no data", `{"usage":{"prompt_tokens":1}}`, 1, nil, nil, errNoData},
		{"too few", embedOK, 3, nil, nil, errDataCount},
		{"empty data", `{"data":[]}`, 0, nil, nil, errDataCount},
		{"repeated index", `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`, 2, nil, nil, errDataIndex},
		{"index out of range", `{"data":[{"index":1,"embedding":[1]}]}`, 1, nil, nil, errDataIndex},
		{"fractional index", `{"data":[{"index":0.5,"embedding":[1]}]}`, 1, nil, nil, errDataIndex},
		{"string values", `{"data":[{"embedding":["1"]}]}`, 1, nil, nil, errEmbeddingType},
		{"null value", `{"data":[{"embedding":[null]}]}`, 1, nil, nil, errEmbeddingType},
		{"null embedding", `{"data":[{"embedding":null}]}`, 1, nil, nil, errEmbeddingType},
		{"empty vector", `{"data":[{"embedding":[]}]}`, 1, nil, nil, errEmbeddingEmpty},
		{"overflow", `{"data":[{"embedding":[1e999]}]}`, 1, nil, nil, errNotFinite},
		{"NaN in base64", `{"data":[{"embedding":"` + b64(float32(math.NaN())) + `"}]}`, 1, nil, nil, errNotFinite},
		{"short base64", `{"data":[{"embedding":"AAA="}]}`, 1, nil, nil, errEmbeddingBase64},
		{"uneven lengths", `{"data":[{"embedding":[1]},{"embedding":[1,2]}]}`, 2, nil, nil, errDimensions},
		{"uneven lengths, reordered", `{"data":[{"index":1,"embedding":[1]},{"index":0,"embedding":[1,2]}]}`, 2, nil, nil, errDimensions},
		{"not the dimensions", embedOK, 2, new(3), nil, errDimensions},
	} {
		got, err := DecodeEmbedding([]byte(c.body), c.inputs, c.dims)
		if c.err != nil {
			if !errors.Is(err, c.err) || !errors.Is(err, pktype.ErrMalformedResponse) || got != nil {
				t.Errorf("%s: %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got.Vectors, c.want) {
			t.Errorf("%s: %+v, %v", c.name, got, err)
		}
	}
}

// TestEmbeddingUsageSurvivesBadData: the provider billed a body whose
// data is unusable; its usage is still reported.
func TestEmbeddingUsageSurvivesBadData(t *testing.T) {
	t.Parallel()
	_, u, p, err := decodeEmbedding([]byte(`{"data":[{"embedding":"?"}],"usage":{"prompt_tokens":3,"total_tokens":null}}`), 1, nil)
	if err == nil || u.PromptTokens != 3 || !p.PromptTokens || p.TotalTokens {
		t.Fatalf("%+v %+v %v", u, p, err)
	}
}

// FuzzDecodeEmbedding: any body decodes to one finite vector per input,
// all of one length (the dimensions asked for, when asked), with usage
// that tells unknown from zero; or fails with ErrMalformedResponse and
// no vectors.
func FuzzDecodeEmbedding(f *testing.F) {
	for _, s := range []string{
		embedOK,
		`{"data":[{"index":0,"embedding":"` + b64(1, 2) + `"}],"usage":{"prompt_tokens":1,"total_tokens":1}}`,
		`{"data":[{"embedding":[1]},{"embedding":[2]}]}`,
		`{"data":null,"usage":{"prompt_tokens":2}}`,
	} {
		f.Add([]byte(s), uint16(0), int16(-1))
		f.Add([]byte(s), uint16(2), int16(2))
	}
	f.Fuzz(func(t *testing.T, body []byte, inputs uint16, d int16) {
		var dims *int
		if d >= 0 {
			dims = new(int(d))
		}
		n := int(inputs % 8)
		resp, usage, presence, err := decodeEmbedding(body, n, dims)
		checkUsage(t, usage, presence)
		if err != nil {
			if resp != nil || !errors.Is(err, pktype.ErrMalformedResponse) {
				t.Fatalf("resp %+v with err %v", resp, err)
			}
			return
		}
		if n > 0 && len(resp.Vectors) != n || len(resp.Vectors) == 0 {
			t.Fatalf("%d vectors for %d inputs", len(resp.Vectors), n)
		}
		for _, v := range resp.Vectors {
			if len(v) == 0 || len(v) != len(resp.Vectors[0]) || dims != nil && len(v) != *dims {
				t.Fatalf("vector lengths %d, first %d, dims %v", len(v), len(resp.Vectors[0]), dims)
			}
			for _, x := range v {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("non-finite %v", x)
				}
			}
		}
		if resp.Usage != usage || resp.Presence() != presence {
			t.Fatalf("response usage %+v differs from %+v", resp.Usage, usage)
		}
		r2, err2 := DecodeEmbedding(body, n, dims)
		if err2 != nil || !reflect.DeepEqual(r2, resp) {
			t.Fatalf("DecodeEmbedding disagrees: %v", err2)
		}
	})
}
