package openaiapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
)

// TestSchemaOverLimitsNamesTheParameter: a chat request or a batch line
// whose response_format schema breaks a rule of ChatRequest.Normalize (too
// deep, a NUL) is refused on that parameter, not on the last message.
func TestSchemaOverLimitsNamesTheParameter(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"items":`, 4999) + `{}` + strings.Repeat(`}`, 4999)
	chat := func(schema string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}],` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}}`
	}
	for _, c := range []struct{ schema, words string }{
		{deep, "is nested deeper than 64 levels"},
		{`{"description":"a\u0000b"}`, "contains a NUL character"},
	} {
		_, err := openaiapi.DecodeChat([]byte(chat(c.schema)))
		var re *jobs.RequestError
		if !errors.As(err, &re) || re.Param != "response_format.json_schema.schema" || !strings.Contains(re.Message, c.words) {
			t.Errorf("DecodeChat: %#v", err)
		}
		_, err = openaiapi.ParseBatchLine([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":` + chat(c.schema) + `}`))
		if !errors.As(err, &re) || re.Param != "body.response_format.json_schema.schema" || !strings.Contains(re.Message, c.words) {
			t.Errorf("ParseBatchLine: %#v", err)
		}
	}
}
