package jobs

import (
	"encoding/json"
	"fmt"

	"github.com/promptkit/promptkit/pktype"
)

// EmbeddingRequest is a stored embeddings request: the texts whose vectors
// a job computes, what a batch line for /v1/embeddings runs. Like a
// ChatRequest it is promptkit's own form: the model is the prompt's
// Profile and ExecutionOptions.
type EmbeddingRequest struct {
	// Input holds the texts, one vector each: 1 to
	// pktype.MaxEmbeddingInputs, none empty.
	Input []string `json:"input"`
	// Dimensions, when set, is the vectors' length asked for.
	Dimensions *int `json:"dimensions,omitempty"`
	// EncodingFormat is how the answer gives the vectors: "" or
	// pktype.EncodingFloat (JSON numbers), pktype.EncodingBase64 (base64
	// of their float32 values). The vectors are stored as numbers either
	// way; it changes only how an answer is written.
	EncodingFormat string `json:"encoding_format,omitempty"`
}

// Normalize checks e: 1 to pktype.MaxEmbeddingInputs inputs, none empty
// or holding a NUL; dimensions positive; a known encoding format.
// Messages name fields and indexes, never inputs.
func (e EmbeddingRequest) Normalize() (EmbeddingRequest, error) {
	switch {
	case len(e.Input) == 0:
		return e, invalidField("input", "must hold at least one text")
	case len(e.Input) > pktype.MaxEmbeddingInputs:
		return e, invalidField("input", "holds more than %d texts", pktype.MaxEmbeddingInputs)
	case e.Dimensions != nil && *e.Dimensions < 1:
		return e, invalidField("dimensions", "must be at least 1")
	}
	switch e.EncodingFormat {
	case "", pktype.EncodingFloat, pktype.EncodingBase64:
	default:
		return e, invalidField("encoding_format", "must be %q or %q", pktype.EncodingFloat, pktype.EncodingBase64)
	}
	for i, s := range e.Input {
		field := fmt.Sprintf("input[%d]", i)
		if s == "" {
			return e, invalidField(field, "is empty")
		}
		if err := checkText(field, s); err != nil {
			return e, err
		}
	}
	return e, nil
}

// EncodeEmbedding is the stored form of a prompt's embeddings request,
// the same on every store: its JSON, nil when there is none.
func EncodeEmbedding(e *EmbeddingRequest) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, invalid("embedding: %v", err)
	}
	return b, nil
}

// DecodeEmbedding reads EncodeEmbedding's form: nil for none (empty).
func DecodeEmbedding(b []byte) (*EmbeddingRequest, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var e EmbeddingRequest
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("embedding: %w", err)
	}
	return &e, nil
}
