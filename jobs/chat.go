package jobs

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/promptkit/promptkit/pktype"
)

// Response formats of a ChatRequest.
const (
	FormatText       = ""
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ChatRequest is a stored chat completion request: a whole conversation
// and its sampling parameters, what POST /v1/chat/completions and a batch
// line run. It is promptkit's own form, not OpenAI's wire format (see
// internal/openaiapi): the model is the prompt's Profile and
// ExecutionOptions, and what promptkit does not support was refused
// before it got here.
type ChatRequest struct {
	// Messages is the conversation, sent as given after the profile's
	// system text (when it has one).
	Messages []pktype.Message `json:"messages"`
	pktype.Sampling
	// ResponseFormat is FormatText, FormatJSONObject (the answer must be
	// a JSON object) or FormatJSONSchema (the answer must satisfy Schema,
	// named SchemaName; promptkit validates and repairs it).
	ResponseFormat string          `json:"response_format,omitempty"`
	SchemaName     string          `json:"schema_name,omitempty"`
	Schema         json.RawMessage `json:"schema,omitempty"`

	// normalized marks a request Normalize returned (see Normalize).
	normalized bool
}

// Normalize checks c: at least one message, each with a known role and
// the last not empty; a format promptkit knows, with a schema exactly
// when it is json_schema, which must be a JSON object within the limits
// of pktype.CheckSchemaShape.
//
// A request is checked once, where it is decoded (internal/openaiapi):
// the request Normalize returns is marked as checked, and normalizing it
// again (EnqueueParams.Normalize, in the store) returns it as it is,
// since the schema is the costly part. So change a request by making a
// new one, not by editing one Normalize returned.
func (c ChatRequest) Normalize() (ChatRequest, error) {
	if c.normalized {
		return c, nil
	}
	if len(c.Messages) == 0 {
		return c, invalid("chat: messages is empty")
	}
	for i, m := range c.Messages {
		switch m.Role {
		case pktype.RoleSystem, pktype.RoleUser, pktype.RoleAssistant:
		default:
			return c, invalid("chat: messages[%d].role must be system, user or assistant", i)
		}
		if err := checkText(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
			return c, err
		}
	}
	for i, s := range c.Stop {
		if err := checkText(fmt.Sprintf("stop[%d]", i), s); err != nil {
			return c, err
		}
	}
	if err := checkText("response_format.json_schema.name", c.SchemaName); err != nil {
		return c, err
	}
	if err := checkJSONText("response_format.json_schema.schema", c.Schema); err != nil {
		return c, err
	}
	if len(c.Schema) > 0 {
		// Refused here, before any store or compile sees it: compiling
		// costs far more than the schema's size suggests.
		if err := pktype.CheckSchemaShape(c.Schema); err != nil {
			return c, invalidField("response_format.json_schema.schema", "%v", err)
		}
	}
	if strings.TrimSpace(c.Messages[len(c.Messages)-1].Content) == "" {
		return c, invalid("chat: the last message is empty")
	}
	switch c.ResponseFormat {
	case FormatText, FormatJSONObject:
		if len(c.Schema) > 0 || c.SchemaName != "" {
			return c, invalid("chat: a schema goes with response_format json_schema")
		}
	case FormatJSONSchema:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(c.Schema, &obj); err != nil || obj == nil {
			return c, invalid("chat: the json_schema schema is not a JSON object")
		}
	default:
		return c, invalid("chat: unknown response_format %q", c.ResponseFormat)
	}
	if c.MaxTokens != nil && *c.MaxTokens < 1 {
		return c, invalid("chat: max_tokens must be at least 1")
	}
	c.normalized = true
	return c, nil
}

// EncodeChat is the stored form of a prompt's chat request, the same on
// every store: its JSON, nil when there is none. A request JSON cannot
// hold (a NaN temperature) is ErrInvalid.
func EncodeChat(c *ChatRequest) ([]byte, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, invalid("chat: %v", err)
	}
	return b, nil
}

// DecodeChat reads EncodeChat's form: nil for none (empty).
func DecodeChat(b []byte) (*ChatRequest, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var c ChatRequest
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return &c, nil
}
