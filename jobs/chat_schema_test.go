package jobs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// TestChatSchemaOverLimits: ChatRequest.Normalize, which every way in
// and both stores apply, refuses a schema over pktype's limits with an
// InvalidError naming the field and the limit, never the schema.
func TestChatSchemaOverLimits(t *testing.T) {
	t.Parallel()
	chat := func(schema string) jobs.ChatRequest {
		return jobs.ChatRequest{
			Messages:       []pktype.Message{{Role: pktype.RoleUser, Content: "hi"}},
			ResponseFormat: jobs.FormatJSONSchema, SchemaName: "x", Schema: json.RawMessage(schema),
		}
	}
	deep := strings.Repeat(`{"items":`, 4999) + `{}` + strings.Repeat(`}`, 4999)
	anyOf := func(n int, item func(i int) string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = item(i)
		}
		return `{"anyOf":[` + strings.Join(items, ",") + `]}`
	}
	for _, c := range []struct{ schema, reason string }{
		{deep, pktype.ErrSchemaTooDeep.Error()},
		{`{"anyOf":[` + strings.Repeat(`true,`, 2048) + `true]}`, pktype.ErrSchemaTooManyNodes.Error()},
		{`{"description":"` + strings.Repeat("items", 30000) + `"}`, pktype.ErrSchemaTooLarge.Error()},
		// Within the shape, over what the compile may cost (issue 40).
		{anyOf(pktype.MaxSchemaPatterns+1, func(i int) string { return fmt.Sprintf(`{"pattern":"^items%d$"}`, i) }), pktype.ErrSchemaTooManyPatterns.Error()},
		{anyOf(11, func(i int) string { return fmt.Sprintf(`{"pattern":"[%c-z]{999}items"}`, 'a'+i) }), pktype.ErrSchemaPatternsTooLarge.Error()},
		{anyOf(pktype.MaxSchemaResources+1, func(i int) string { return fmt.Sprintf(`{"$id":"items%d"}`, i) }), pktype.ErrSchemaTooManyResources.Error()},
	} {
		_, err := chat(c.schema).Normalize()
		var ie *jobs.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, jobs.ErrInvalid) || ie.Field != "response_format.json_schema.schema" || ie.Reason != c.reason {
			t.Errorf("Normalize: %#v, want the field and %q", err, c.reason)
			continue
		}
		if strings.Contains(err.Error(), "items") || strings.Contains(err.Error(), "true") {
			t.Errorf("the error quotes the schema: %v", err)
		}
		p := jobs.EnqueueParams{Chat: new(chat(c.schema))}
		if _, err := p.Normalize(); !errors.As(err, &ie) || ie.Field != "response_format.json_schema.schema" {
			t.Errorf("EnqueueParams.Normalize: %v", err)
		}
	}
	if _, err := chat(strings.Repeat(`{"items":`, 63) + `{}` + strings.Repeat(`}`, 63)).Normalize(); err != nil {
		t.Fatalf("a schema 64 deep: %v", err)
	}
	atCaps := anyOf(pktype.MaxSchemaPatterns, func(i int) string {
		if i < pktype.MaxSchemaResources {
			return fmt.Sprintf(`{"$id":"r%d","pattern":"^x%d$"}`, i, i)
		}
		return fmt.Sprintf(`{"pattern":"^x%d$"}`, i)
	})
	if _, err := chat(atCaps).Normalize(); err != nil {
		t.Fatalf("a schema with as many patterns and $ids as allowed: %v", err)
	}
}
