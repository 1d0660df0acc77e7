package openaiapi

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// EmbeddingParams is a decoded embeddings request.
type EmbeddingParams struct {
	// Model is the request's model, as sent (see jobs.Resolve).
	Model string
	// Input holds the texts, one vector each.
	Input []string
	// Dimensions is the vectors' length asked for; nil: the model's.
	Dimensions *int
	// Base64 is encoding_format "base64": the answer's vectors as base64
	// of their little-endian float32 values.
	Base64 bool
	// User is accepted and not sent, as for chat.
	User string
}

// DecodeEmbeddings decodes an OpenAI embeddings request body: model,
// input (a string or an array of 1 to 2048 strings, none empty),
// dimensions, encoding_format ("float" or "base64") and user. A token
// array (an input of integers) is refused naming "input": promptkit
// embeds text and does not know the backend's tokenizer. An unknown
// parameter is refused too; null is an unset parameter. Every error is a
// *jobs.RequestError whose message never quotes the request.
func DecodeEmbeddings(body []byte) (EmbeddingParams, error) {
	return decodeEmbeddings(body, "")
}

// decodeEmbeddings is DecodeEmbeddings naming parameters after prefix
// ("body." in a batch line).
func decodeEmbeddings(body []byte, prefix string) (EmbeddingParams, error) {
	var out EmbeddingParams
	// The body's own name: "" for a request, "body" for a batch line's.
	m, err := object(body, strings.TrimSuffix(prefix, "."))
	if err != nil {
		return out, err
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		raw := m[key]
		p := prefix + key
		if isNull(raw) {
			if key == "model" || key == "input" {
				return out, reqErr(p, CodeMissingParameter, "%s is required.", p)
			}
			continue
		}
		switch key {
		case "model":
			out.Model, err = decodeModel(raw, p)
		case "input":
			out.Input, err = decodeEmbeddingInput(raw, p)
		case "dimensions":
			var n int64
			if n, err = decodeInt(raw, p); err == nil {
				if n < 1 || n > math.MaxInt32 {
					err = reqErr(p, CodeInvalidValue, "%s must be at least 1.", p)
					break
				}
				out.Dimensions = new(int(n))
			}
		case "encoding_format":
			var f string
			if f, err = decodeString(raw, p); err == nil {
				switch f {
				case pktype.EncodingFloat:
				case pktype.EncodingBase64:
					out.Base64 = true
				default:
					err = reqErr(p, CodeInvalidValue, "%s must be %q or %q.", p, pktype.EncodingFloat, pktype.EncodingBase64)
				}
			}
		case "user":
			out.User, err = decodeString(raw, p)
		default:
			err = unknownKey(prefix, key)
		}
		if err != nil {
			return out, err
		}
	}
	switch {
	case out.Model == "":
		return out, reqErr(prefix+"model", CodeMissingParameter, "%smodel is required.", prefix)
	case out.Input == nil:
		return out, reqErr(prefix+"input", CodeMissingParameter, "%sinput is required.", prefix)
	}
	// What the store refuses of a request (a NUL) is refused on both
	// routes, the synchronous one too: one that reached a backend would
	// come back in its answer.
	if _, err := out.Request().Normalize(); err != nil {
		if ie, ok := errors.AsType[*jobs.InvalidError](err); ok && ie.Field != "" {
			return out, reqErr(prefix+ie.Field, CodeInvalidValue, "%s%s %s.", prefix, ie.Field, ie.Reason)
		}
		return out, reqErr(prefix+"input", CodeInvalidValue, "%sinput is not a valid embeddings input.", prefix)
	}
	return out, nil
}

// Request is the embeddings request as promptkit stores one (a batch
// line's): the model goes to the prompt's profile and options instead.
func (e EmbeddingParams) Request() jobs.EmbeddingRequest {
	r := jobs.EmbeddingRequest{Input: e.Input, Dimensions: e.Dimensions}
	if e.Base64 {
		r.EncodingFormat = pktype.EncodingBase64
	}
	return r
}

// decodeEmbeddingInput reads input (named param): one string, or an
// array of strings.
func decodeEmbeddingInput(raw json.RawMessage, param string) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, reqErr(param, CodeInvalidValue, "%s must not be empty.", param)
		}
		return []string{one}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalidType(param, "a string or an array of strings")
	}
	switch {
	case len(items) == 0:
		return nil, reqErr(param, CodeInvalidValue, "%s must hold at least one string.", param)
	case len(items) > pktype.MaxEmbeddingInputs:
		return nil, reqErr(param, CodeInvalidValue, "%s holds more than %d strings.", param, pktype.MaxEmbeddingInputs)
	case tokenArrays(items):
		return nil, reqErr(param, CodeUnsupportedValue,
			"promptkit embeds text: token arrays are not supported; send the input as a string or an array of strings.")
	}
	out := make([]string, len(items))
	for i, it := range items {
		p := param + "[" + strconv.Itoa(i) + "]"
		if err := json.Unmarshal(it, &out[i]); err != nil || isNull(it) {
			return nil, invalidType(p, "a string")
		}
		if out[i] == "" {
			return nil, reqErr(p, CodeInvalidValue, "%s must not be empty.", p)
		}
	}
	return out, nil
}

// tokenArrays reports whether an input array is a token array (numbers)
// or an array of them, to name what is refused.
func tokenArrays(items []json.RawMessage) bool {
	for _, it := range items {
		var inner []json.RawMessage
		switch {
		case isNumber(it):
		case json.Unmarshal(it, &inner) == nil && len(inner) > 0 && !slices.ContainsFunc(inner, func(r json.RawMessage) bool { return !isNumber(r) }):
		default:
			return false
		}
	}
	return true
}

// isNumber reports whether a JSON value is a number literal.
func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// EmbeddingList is OpenAI's answer to an embeddings request.
type EmbeddingList struct {
	Object string            `json:"object"`
	Data   []EmbeddingObject `json:"data"`
	Model  string            `json:"model"`
	// Usage is present only when the backend reported prompt_tokens;
	// promptkit never sends numbers for counts it does not know.
	Usage *EmbeddingUsage `json:"usage,omitempty"`
}

// EmbeddingObject is one vector of an EmbeddingList.
type EmbeddingObject struct {
	Object string `json:"object"`
	Index  int    `json:"index"`
	// Embedding is a []float64, or a base64 string.
	Embedding any `json:"embedding"`
}

// EmbeddingUsage is the usage of an embeddings answer.
type EmbeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// Embeddings is the answer for vectors (in input order) from model with
// usage u: floats, or base64 of their float32 values when asked. The
// usage is present when prompt_tokens is known; a missing total is the
// prompt count (an embedding has no completion).
func Embeddings(vectors [][]float64, model string, u pktype.Usage, asBase64 bool) EmbeddingList {
	out := EmbeddingList{Object: "list", Data: make([]EmbeddingObject, len(vectors)), Model: model}
	for i, v := range vectors {
		out.Data[i] = EmbeddingObject{Object: "embedding", Index: i, Embedding: v}
		if asBase64 {
			out.Data[i].Embedding = Base64Vector(v)
		}
	}
	if u.Known.PromptTokens {
		out.Usage = &EmbeddingUsage{PromptTokens: u.PromptTokens, TotalTokens: u.PromptTokens}
		if u.Known.TotalTokens {
			out.Usage.TotalTokens = u.TotalTokens
		}
	}
	return out
}

// Base64Vector is OpenAI's base64 encoding of a vector: its values as
// little-endian float32s.
func Base64Vector(v []float64) string {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}
