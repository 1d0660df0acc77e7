package openai

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/promptkit/promptkit/pktype"
)

// maxDetailBytes bounds a provider message kept for Detail.
const maxDetailBytes = 512

// errorDetail turns a non-2xx body into a short, redacted, printable
// detail. OpenAI-style {"error":{...}} bodies are reduced to
// "type: code: message"; anything else is used as raw text.
func errorDetail(body []byte, apiKey string) string {
	s := providerMessage(body)
	if s == "" {
		s = string(body)
	}
	return pktype.Redact(s, maxDetailBytes, apiKey)
}

func providerMessage(body []byte) string {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		return ""
	}
	// Some compatible servers send {"error": "text"}.
	if s := scalar(env.Error); s != "" {
		return s
	}
	var obj struct {
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(env.Error, &obj) != nil {
		return ""
	}
	var parts []string
	for _, raw := range []json.RawMessage{obj.Type, obj.Code, obj.Message} {
		if s := scalar(raw); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// scalar renders a JSON string or number; anything else is "".
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String()
		}
	}
	return ""
}
