package openaiapi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/jobs"
)

// TestDecodeResponsesReferenceLimits: a request's item references are
// bounded in number and in the responses they name (told apart by the
// prompt in their ids), each a RequestError on input naming the limit and
// quoting no id; at both limits the request decodes.
func TestDecodeResponsesReferenceLimits(t *testing.T) {
	t.Parallel()
	body := func(n int, id func(i int) string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(`{"type":"item_reference","id":%q}`, id(i))
		}
		return `{"model":"m","input":[` + strings.Join(items, ",") + `]}`
	}
	// Reference i names an item (an input message or call, or an output
	// message) of response i modulo responses.
	of := func(responses int) func(i int) string {
		return func(i int) string {
			return fmt.Sprintf([]string{"msg_zqx%d_in%d", "fc_zqx%d_in%d", "msg_zqx%d_%d"}[i%3], i%responses, i)
		}
	}
	for _, c := range []struct {
		name, body, words string // words empty: decodes
	}{
		{"references at the limit", body(openaiapi.MaxItemReferences, of(1)), ""},
		{"references over", body(openaiapi.MaxItemReferences+1, of(1)), fmt.Sprintf("more than %d item references", openaiapi.MaxItemReferences)},
		{"responses at the limit", body(openaiapi.MaxItemReferences, of(openaiapi.MaxReferencedResponses)), ""},
		{"responses over", body(openaiapi.MaxReferencedResponses+1, of(openaiapi.MaxReferencedResponses+1)),
			fmt.Sprintf("items of more than %d responses", openaiapi.MaxReferencedResponses)},
		// An id promptkit did not make names no response: it is not found later.
		{"foreign ids", body(openaiapi.MaxReferencedResponses+1, func(i int) string { return fmt.Sprintf("zqx%d", i) }), ""},
	} {
		_, err := openaiapi.DecodeResponses([]byte(c.body))
		if c.words == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		re, ok := errors.AsType[*jobs.RequestError](err)
		if !ok || re.Param != "input" || re.Code != openaiapi.CodeInvalidValue || !strings.Contains(re.Message, c.words) || strings.Contains(re.Message, "zqx") {
			t.Errorf("%s: %#v", c.name, err)
		}
	}
}
