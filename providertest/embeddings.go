package providertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Embedding defaults and limits of the fake.
const (
	// DefaultEmbeddingDimensions is the length of a generated vector when
	// the request sets no "dimensions": small, so tests stay readable.
	DefaultEmbeddingDimensions = 16
	// MaxEmbeddingDimensions bounds "dimensions", so a request cannot make
	// the fake allocate without bound (OpenAI's largest model has 3072).
	MaxEmbeddingDimensions = 8192
	// maxEmbeddingInputs is OpenAI's limit on inputs per request.
	maxEmbeddingInputs = 2048
)

// EmbeddingFor returns the vector the default responder answers for text
// with the given length (DefaultEmbeddingDimensions when dimensions is 0
// or less): derived from SHA-256 of the text, so equal texts get equal
// vectors on every run, scaled to length 1 as OpenAI's are, and made of
// float32 values, so a base64 answer decodes to exactly these numbers. A
// token-array input is embedded as its JSON text (Request.Input).
func EmbeddingFor(text string, dimensions int) []float64 {
	if dimensions <= 0 {
		dimensions = DefaultEmbeddingDimensions
	}
	v := make([]float64, dimensions)
	var block [sha256.Size]byte
	var norm float64
	for i := range v {
		if i%8 == 0 {
			// Eight values per hash: the text, then the block number.
			block = sha256.Sum256(binary.BigEndian.AppendUint32([]byte(text+"\x00"), uint32(i/8)))
		}
		u := binary.BigEndian.Uint32(block[4*(i%8):])
		v[i] = float64(u)/math.MaxUint32*2 - 1
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	for i := range v {
		if norm > 0 {
			v[i] /= norm
		}
		v[i] = float64(float32(v[i]))
	}
	return v
}

// embeddingsPath reports whether path is the embeddings route.
func embeddingsPath(path string) bool { return strings.HasSuffix(path, "/embeddings") }

// answersPOST reports whether path is a route that takes POST requests
// and answers them from the script or the default responder, under the
// rate limiters: chat completions and embeddings.
func answersPOST(path string) bool {
	return strings.HasSuffix(path, "/chat/completions") || embeddingsPath(path)
}

// embedRequest is the part of a valid embeddings body the default
// responder needs.
type embedRequest struct {
	model      string
	input      []string
	tokens     []int // per input: its token count when it is a token array, else -1
	dimensions int
	base64     bool
}

// serveEmbeddings decides an embeddings request: arrival (limits and the
// script, shared with chat requests), then its reply.
func (h *Handler) serveEmbeddings(r *http.Request, body []byte, readErr error) (admission, *reply) {
	rec, emb, parseErr := parseEmbeddings(r, body)
	if readErr != nil {
		parseErr = readErr
	}
	a := h.arrive(rec, r)
	return a, h.respond(r.Context(), a, parseErr, func(rs *Response) *reply { return h.buildEmbeddings(rs, emb) }, &Response{})
}

// Wire types of an embeddings answer.
type (
	embeddingList struct {
		Object string          `json:"object"`
		Data   []embeddingItem `json:"data,omitempty"`
		Model  string          `json:"model"`
		Usage  json.RawMessage `json:"usage,omitempty"`
	}
	embeddingItem struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"` // []float64, or a base64 string
	}
	embeddingUsage struct {
		PromptTokens int  `json:"prompt_tokens"`
		TotalTokens  *int `json:"total_tokens,omitempty"` // omitted by UsagePartial
	}
)

// buildEmbeddings renders a scripted or default Response to an
// embeddings request: Status, Header, Body and Usage as for a chat
// request (Text is not used), and for a generated 2xx body one
// EmbeddingFor vector per input. emb is nil when the body was not a valid
// request: a generated body then holds no data.
func (h *Handler) buildEmbeddings(rs *Response, emb *embedRequest) *reply {
	status := rs.status()
	if status < 100 || status > 999 {
		status = http.StatusInternalServerError // WriteHeader would panic
	}
	out := &reply{status: status, header: rs.Header.Clone(), body: rs.Body}
	switch {
	case out.body != nil:
		out.body = append([]byte(nil), out.body...)
		return out
	case status < 200 || status > 299:
		out.body = statusError(status)
		return out
	}
	if emb == nil {
		emb = &embedRequest{}
	}
	model := firstOf(h.model, emb.model, defaultModel)
	list := embeddingList{Object: "list", Model: model, Usage: renderEmbeddingUsage(rs.Usage, emb)}
	if !rs.omitChoices {
		list.Data = []embeddingItem{}
		for i, text := range emb.input {
			v := EmbeddingFor(text, emb.dimensions)
			item := embeddingItem{Object: "embedding", Index: i, Embedding: v}
			if emb.base64 {
				item.Embedding = base64Vector(v)
			}
			list.Data = append(list.Data, item)
		}
	}
	out.body, _ = json.Marshal(list) // strings, ints and finite floats
	return out
}

// firstOf returns the first non-empty string.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// base64Vector is OpenAI's base64 encoding: little-endian float32s.
func base64Vector(v []float64) string {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// renderEmbeddingUsage encodes u for an embeddings answer, where only
// prompt_tokens and total_tokens exist; computed counts are the inputs'
// words (a token array: its length).
func renderEmbeddingUsage(u Usage, emb *embedRequest) json.RawMessage {
	words := 0
	for i, s := range emb.input {
		if n := emb.tokens[i]; n >= 0 {
			words += n
		} else {
			words += countWords(s)
		}
	}
	var v embeddingUsage
	switch u.Mode {
	case UsageAbsent:
		return nil
	case UsageNull:
		return json.RawMessage("null")
	case UsageZero:
		v = embeddingUsage{TotalTokens: new(0)}
	case UsagePartial:
		v.PromptTokens = cmpInt(u.PromptTokens, words)
	default: // UsageFull and unknown modes
		if u == (Usage{Mode: u.Mode}) {
			u.PromptTokens, u.TotalTokens = words, words
		}
		v = embeddingUsage{PromptTokens: u.PromptTokens, TotalTokens: new(u.TotalTokens)}
	}
	b, _ := json.Marshal(v)
	return b
}

func cmpInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// rawEmbedRequest holds the body fields the fake reads.
type rawEmbedRequest struct {
	Model          json.RawMessage `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     json.RawMessage `json:"dimensions"`
	EncodingFormat json.RawMessage `json:"encoding_format"`
}

// parseEmbeddings records r and decodes its embeddings body. emb is nil
// when the body is not a valid request; err, a *requestError, says why.
// An input is a string, an array of strings, a token array (integers) or
// an array of token arrays, as OpenAI takes it.
func parseEmbeddings(r *http.Request, body []byte) (rec Request, emb *embedRequest, err error) {
	rec = Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var raw rawEmbedRequest
	if err := json.Unmarshal(body, &raw); err != nil {
		return rec, nil, &requestError{message: "request body is not a valid JSON object", code: "invalid_request"}
	}
	var model string
	if json.Unmarshal(raw.Model, &model) == nil {
		rec.Model = model
	}
	input, tokens, inputErr := embeddingInputs(raw.Input)
	rec.Input = input
	switch {
	case model == "":
		return rec, nil, &requestError{message: "you must provide a model parameter", param: "model", code: "invalid_request"}
	case inputErr != nil:
		return rec, nil, inputErr
	}
	emb = &embedRequest{model: model, input: input, tokens: tokens}
	if present(raw.Dimensions) {
		var d float64
		if json.Unmarshal(raw.Dimensions, &d) != nil || d != math.Trunc(d) {
			return rec, nil, invalidType("dimensions", "an integer")
		}
		if d < 1 || d > MaxEmbeddingDimensions {
			return rec, nil, unsupported("dimensions", "invalid_value",
				"'dimensions' must be from 1 to %d (got %s).", MaxEmbeddingDimensions, raw.Dimensions)
		}
		emb.dimensions = int(d)
	}
	if present(raw.EncodingFormat) {
		var f string
		if json.Unmarshal(raw.EncodingFormat, &f) != nil || f != "float" && f != "base64" {
			return rec, nil, unsupported("encoding_format", "invalid_value", "'encoding_format' must be 'float' or 'base64'.")
		}
		emb.base64 = f == "base64"
	}
	return rec, emb, nil
}

// errInput is OpenAI's answer to an input it cannot take.
var errInput = &requestError{message: "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", param: "input", code: "invalid_request"}

// embeddingInputs reads "input": the texts (a token array as its JSON),
// and per input its token count (-1 for a text).
func embeddingInputs(raw json.RawMessage) ([]string, []int, error) {
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return nil, nil, &requestError{message: "you must provide an input parameter", param: "input", code: "invalid_request"}
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil, errInput
		}
		return []string{one}, []int{-1}, nil
	}
	var ints []int
	if json.Unmarshal(raw, &ints) == nil {
		if len(ints) == 0 {
			return nil, nil, errInput
		}
		return []string{tokenText(ints)}, []int{len(ints)}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 || len(items) > maxEmbeddingInputs {
		return nil, nil, errInput
	}
	texts, tokens := make([]string, len(items)), make([]int, len(items))
	for i, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil && s != "" {
			texts[i], tokens[i] = s, -1
			continue
		}
		if json.Unmarshal(it, &ints) == nil && len(ints) > 0 {
			texts[i], tokens[i] = tokenText(ints), len(ints)
			continue
		}
		return nil, nil, errInput
	}
	return texts, tokens, nil
}

// tokenText is a token array's JSON, the text the fake embeds for it.
func tokenText(ints []int) string {
	parts := make([]string, len(ints))
	for i, n := range ints {
		parts[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
