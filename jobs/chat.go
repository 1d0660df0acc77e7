package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

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
	// Format is the response_format as the client wrote it, sent as such
	// (see promptkit.RunRequest.ResponseFormat); ResponseFormat, Schema
	// and SchemaName are what promptkit reads of it.
	Format json.RawMessage `json:"format,omitempty"`
	// ToolUse is the function tools the model may call, stored with the
	// request so that every attempt, after a retry or a reclaim too,
	// sends the same tools.
	pktype.ToolUse
	// Metadata is the request's metadata (at most 16 string pairs), kept
	// and returned with its answer: a Responses API request's (a chat
	// completion's is not kept).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Responses is set for a request made through the Responses API: what
	// its response object echoes and continues from.
	Responses *ResponsesRequest `json:"responses,omitempty"`

	// normalized marks a request Normalize returned (see Normalize).
	normalized bool
}

// Normalize checks c: at least one message, each with a known role
// (pktype.CheckMessages) and the last not empty unless it is a tool's
// result or makes calls; tools as pktype.ToolUse.Check wants them; a
// format promptkit knows, with a schema exactly when it is json_schema,
// which must be a JSON object within the limits of
// pktype.CheckSchemaShape and pktype.CheckSchemaCost; metadata and the
// Responses fields without a NUL, the input's start within the messages.
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
	if err := pktype.CheckMessages(c.Messages); err != nil {
		return c, fieldInvalid(err)
	}
	for i, m := range c.Messages {
		if err := checkText(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
			return c, err
		}
		if err := checkJSONText(fmt.Sprintf("messages[%d].content", i), m.Parts); err != nil {
			return c, err
		}
		if err := checkParamsText(fmt.Sprintf("messages[%d].", i), m.Extra); err != nil {
			return c, err
		}
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			// Encoded, a NUL anywhere in the calls is a \u0000 escape.
			b, _ := json.Marshal(struct {
				C []pktype.ToolCall
				I string
			}{m.ToolCalls, m.ToolCallID})
			if err := checkJSONText(fmt.Sprintf("messages[%d].tool_calls", i), b); err != nil {
				return c, err
			}
		}
	}
	if err := c.ToolUse.Check(); err != nil {
		return c, fieldInvalid(err)
	}
	if len(c.Tools) > 0 {
		b, err := json.Marshal(c.ToolUse)
		if err != nil {
			return c, invalidField("tools", "cannot be encoded")
		}
		if err := checkJSONText("tools", b); err != nil {
			return c, err
		}
	}
	for i, s := range c.Stop {
		if err := checkText(fmt.Sprintf("stop[%d]", i), s); err != nil {
			return c, err
		}
	}
	if err := pktype.CheckParams(c.Extra, ""); err != nil {
		return c, fieldInvalid(err)
	}
	if err := checkParamsText("", c.Extra); err != nil {
		return c, err
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
		if err := pktype.CheckSchemaCost(c.Schema); err != nil {
			return c, invalidField("response_format.json_schema.schema", "%v", err)
		}
	}
	if err := checkJSONText("response_format", c.Format); err != nil {
		return c, err
	}
	if last := c.Messages[len(c.Messages)-1]; strings.TrimSpace(last.Content) == "" && len(last.Parts) == 0 && last.Role != pktype.RoleTool && len(last.ToolCalls) == 0 {
		return c, invalid("chat: the last message is empty")
	}
	switch c.ResponseFormat {
	case FormatText, FormatJSONObject:
		if len(c.Schema) > 0 || c.SchemaName != "" {
			return c, invalid("chat: a schema goes with response_format json_schema")
		}
	case FormatJSONSchema:
		if !pktype.IsObject(c.Schema) {
			return c, invalid("chat: the json_schema schema is not a JSON object")
		}
	default:
		return c, invalid("chat: unknown response_format %q", c.ResponseFormat)
	}
	if err := c.Responses.check(c); err != nil {
		return c, err
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

// DecodeToolCalls reads a stored response's tool calls column into r:
// none for NULL.
func DecodeToolCalls(b []byte, r *Response) error {
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, &r.ToolCalls); err != nil {
		return fmt.Errorf("tool calls: %w", err)
	}
	return nil
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

// fieldInvalid is pktype's rule error as this package's: ErrInvalid,
// naming the field.
func fieldInvalid(err error) error {
	if fe, ok := errors.AsType[*pktype.FieldError](err); ok {
		return invalidField(fe.Field, "%s", fe.Reason)
	}
	return invalid("chat: %v", err)
}

// AnswerBody is the form of a backend's answer object (a
// chat.completion) that a store keeps (Answer.Body): the object as the
// backend sent it, made storable as SanitizeText makes text (no NUL,
// valid UTF-8). Nil for none; an answer that is not a JSON object is
// ErrInvalid.
func AnswerBody(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !utf8.Valid(raw) {
		raw = json.RawMessage(strings.ToValidUTF8(string(raw), "\uFFFD"))
	}
	raw = sanitizeJSON(raw)
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, invalid("the answer body is not a JSON object")
	}
	return raw, nil
}
