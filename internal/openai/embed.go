package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// embeddingBytesPerInput is how much of an embedding answer each input
// may take when the endpoint sets no MaxResponseBytes: a 3072-float
// vector is about 64 KiB of JSON, so 256 KiB leaves room for larger
// models without letting a runaway body through.
const embeddingBytesPerInput = 256 << 10

// Malformed embedding answers, in fixed words (see decode.go).
var (
	errNoData          = errors.New("data missing or not an array")
	errDataCount       = errors.New("data does not hold one embedding per input")
	errDataIndex       = errors.New("data[].index is missing its input or repeated")
	errEmbeddingType   = errors.New("data[].embedding is neither an array of numbers nor a base64 string")
	errEmbeddingEmpty  = errors.New("data[].embedding is empty")
	errEmbeddingBase64 = errors.New("data[].embedding is not base64 of float32 values")
	errNotFinite       = errors.New("data[].embedding holds a value that is not a finite number")
	errDimensions      = errors.New("embeddings differ in length, or from the dimensions asked for")
)

// wireEmbeddingRequest is OpenAI's embeddings request.
type wireEmbeddingRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	Dimensions     *int     `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format,omitempty"`
}

// PrepareEmbedding validates and encodes one embedding request for
// POST {base}/embeddings and binds it to the credential, like Prepare.
// Input is always sent as an array, whatever its length, so that the
// answer's data lines up with it. Whatever EncodingFormat asks for, the
// outcome's Embedding holds float vectors: a base64 answer is decoded.
func PrepareEmbedding(ep Endpoint, req pktype.EmbeddingRequest) (*Frozen, error) {
	target, err := endpointURL(ep.BaseURL, "embeddings")
	if err != nil {
		return nil, err
	}
	body, err := encodeEmbedding(req)
	if err != nil {
		return nil, err
	}
	n, dims := len(req.Input), req.Dimensions
	f, err := freeze(ep, target, body, func(raw []byte, out *llm.Outcome) error {
		r, usage, presence, err := decodeEmbedding(raw, n, dims)
		out.Usage, out.Presence, out.Embedding = usage, presence, r
		return err
	})
	if err != nil {
		return nil, err
	}
	if ep.MaxResponseBytes <= 0 {
		// Vectors grow with the inputs: the chat default would refuse a
		// large batch's answer.
		f.maxBytes = max(f.maxBytes, int64(n)*embeddingBytesPerInput)
	}
	return f, nil
}

func encodeEmbedding(req pktype.EmbeddingRequest) ([]byte, error) {
	switch {
	case req.Model == "":
		return nil, invalid("model is empty")
	case len(req.Input) == 0:
		return nil, invalid("no input")
	case len(req.Input) > pktype.MaxEmbeddingInputs:
		return nil, invalid("more than %d inputs", pktype.MaxEmbeddingInputs)
	case req.Dimensions != nil && *req.Dimensions < 1:
		return nil, invalid("dimensions must be positive")
	}
	switch req.EncodingFormat {
	case "", pktype.EncodingFloat, pktype.EncodingBase64:
	default:
		return nil, invalid("encoding format must be %q or %q", pktype.EncodingFloat, pktype.EncodingBase64)
	}
	for i, s := range req.Input {
		if s == "" {
			return nil, invalid("input %d is empty", i)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // inputs are not HTML: keep them byte-identical
	w := wireEmbeddingRequest{Model: req.Model, Input: req.Input, Dimensions: req.Dimensions, EncodingFormat: req.EncodingFormat}
	if err := enc.Encode(w); err != nil {
		return nil, invalid("encoding request: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// wireEmbeddingList keeps data raw so that usage survives a bad data
// array, as a chat envelope keeps its choices raw.
type wireEmbeddingList struct {
	Model string          `json:"model"`
	Data  json.RawMessage `json:"data"`
	Usage *wireUsage      `json:"usage"`
}

type wireEmbedding struct {
	// Index is optional: a server that omits it answers in input order.
	Index     *count          `json:"index"`
	Embedding json.RawMessage `json:"embedding"`
}

// DecodeEmbedding strictly decodes a 2xx embeddings body answering inputs
// inputs (0: any number) with, when dims is set, vectors of that length.
// Each embedding may be an array of numbers or a base64 string of
// little-endian float32 values, whichever was asked for: both are
// unambiguous, and some servers ignore encoding_format. Every error wraps
// pktype.ErrMalformedResponse and never quotes the body.
func DecodeEmbedding(body []byte, inputs int, dims *int) (*pktype.EmbeddingResponse, error) {
	r, _, _, err := decodeEmbedding(body, inputs, dims)
	return r, err
}

// decodeEmbedding is DecodeEmbedding plus the usage it could establish,
// also when only the data was unusable (the provider billed it).
func decodeEmbedding(body []byte, inputs int, dims *int) (*pktype.EmbeddingResponse, pktype.TokenUsage, pktype.TokenUsagePresence, error) {
	var u pktype.TokenUsage
	var p pktype.TokenUsagePresence
	raw, err := singleObject(body)
	if err != nil {
		return nil, u, p, err
	}
	var env wireEmbeddingList
	if err := json.Unmarshal(raw, &env); err != nil {
		if errors.Is(err, errInvalidCount) {
			return nil, u, p, malformed(errInvalidCount)
		}
		return nil, u, p, malformed(errWrongType)
	}
	u, p = env.Usage.resolve()

	if len(env.Data) == 0 || env.Data[0] != '[' {
		return nil, u, p, malformed(errNoData)
	}
	var items []wireEmbedding
	if err := json.Unmarshal(env.Data, &items); err != nil {
		if errors.Is(err, errInvalidCount) {
			return nil, u, p, malformed(errDataIndex)
		}
		return nil, u, p, malformed(errWrongType)
	}
	if len(items) == 0 || inputs > 0 && len(items) != inputs {
		return nil, u, p, malformed(errDataCount)
	}
	vectors := make([][]float64, len(items))
	firstAt := 0 // where the first vector went: the others match its length
	for i, it := range items {
		at := i
		if it.Index != nil && it.Index.set {
			at = it.Index.n
		}
		if at < 0 || at >= len(items) || vectors[at] != nil {
			return nil, u, p, malformed(errDataIndex)
		}
		v, err := vector(it.Embedding)
		if err != nil {
			return nil, u, p, malformed(err)
		}
		if dims != nil && len(v) != *dims || i > 0 && len(v) != len(vectors[firstAt]) {
			return nil, u, p, malformed(errDimensions)
		}
		if i == 0 {
			firstAt = at
		}
		vectors[at] = v
	}
	return &pktype.EmbeddingResponse{Vectors: vectors, Model: env.Model, Usage: u, UsagePresence: &p}, u, p, nil
}

// vector decodes one embedding: an array of finite numbers, or base64 of
// little-endian float32 values.
func vector(raw json.RawMessage) ([]float64, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, errEmbeddingType
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errEmbeddingBase64
		}
		if len(b) == 0 {
			return nil, errEmbeddingEmpty
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			f := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, errNotFinite
			}
			v[i] = f
		}
		return v, nil
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, errEmbeddingType
	}
	var nums []number
	if err := json.Unmarshal(raw, &nums); err != nil {
		if errors.Is(err, errNotFinite) {
			return nil, errNotFinite
		}
		return nil, errEmbeddingType
	}
	if len(nums) == 0 {
		return nil, errEmbeddingEmpty
	}
	v := make([]float64, len(nums))
	for i, n := range nums {
		v[i] = float64(n)
	}
	return v, nil
}

// number is one vector component: a JSON number literal only (not null,
// not a quoted number), finite as a float64.
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] == '"' || b[0] == 'n' {
		return errEmbeddingType
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil { // 1e999 overflows: out of range
		return errNotFinite
	}
	*n = number(f)
	return nil
}
