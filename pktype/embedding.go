package pktype

// Embedding encodings: how a provider is asked to send vectors
// (EmbeddingRequest.EncodingFormat). Either way the vectors arrive here
// decoded into floats.
const (
	// EncodingFloat asks for JSON arrays of numbers (OpenAI's default).
	EncodingFloat = "float"
	// EncodingBase64 asks for each vector as the base64 of its
	// little-endian float32 values: about a quarter of the bytes of
	// EncodingFloat. Not every OpenAI-compatible server supports it.
	EncodingBase64 = "base64"
)

// MaxEmbeddingInputs is how many inputs one embedding request may carry,
// OpenAI's limit.
const MaxEmbeddingInputs = 2048

// EmbeddingRequest is one fully resolved embedding call: what the
// built-in client sends to an OpenAI-compatible backend's /embeddings,
// and what an injected Embedder receives.
type EmbeddingRequest struct {
	// BackendID and Model say where the request is meant to go.
	BackendID string `json:"backend_id"`
	Model     string `json:"model"`
	// Input holds the texts to embed, at least one and at most
	// MaxEmbeddingInputs, none empty.
	Input []string `json:"input"`
	// Dimensions, when set, asks for vectors of that length (models that
	// can shorten them, such as OpenAI's text-embedding-3).
	Dimensions *int `json:"dimensions,omitempty"`
	// EncodingFormat is "" (not sent: floats), EncodingFloat or
	// EncodingBase64.
	EncodingFormat string `json:"encoding_format,omitempty"`
}

// EmbeddingResponse is one successful embedding call.
type EmbeddingResponse struct {
	// Vectors holds one vector per input, in input order, all of one
	// length.
	Vectors [][]float64 `json:"vectors"`
	// Model is the model the provider reported; "" when it sent none.
	Model string     `json:"model,omitempty"`
	Usage TokenUsage `json:"usage"`
	// UsagePresence says which Usage fields the provider reported, with
	// GenerateResponse.UsagePresence's rule for nil: nonzero fields are
	// known. An embedding provider reports at most prompt_tokens and
	// total_tokens.
	UsagePresence *TokenUsagePresence `json:"usage_presence,omitempty"`
}

// Presence returns which Usage fields are known, applying the rule for a
// nil UsagePresence.
func (r *EmbeddingResponse) Presence() TokenUsagePresence {
	g := GenerateResponse{Usage: r.Usage, UsagePresence: r.UsagePresence}
	return g.Presence()
}
