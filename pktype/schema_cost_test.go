package pktype_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// costSchema is an object schema whose properties p0, p1, ... have the
// schemas each(0), each(1), ... ("zqx" marks what errors must not quote).
func costSchema(n int, each func(i int) string) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":%s`, i, each(i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

// TestSchemaCostLimits: each of CheckSchemaCost's limits refuses one over
// it and takes one at it; repeats, and keywords where no subschema can
// be, do not count; errors name the limit and never quote the schema.
func TestSchemaCostLimits(t *testing.T) {
	t.Parallel()
	distinct := func(i int) string { return fmt.Sprintf(`{"type":"string","pattern":"^zqx%d$"}`, i) }
	// [a-z]{999} is 1,000 instructions: the class, repeated, and the repeat.
	class := func(i int) string { return fmt.Sprintf(`{"pattern":"[%c-z]{999}"}`, 'a'+i) }
	id := func(i int) string { return fmt.Sprintf(`{"$id":"zqx%d"}`, i) }
	for _, c := range []struct {
		name, schema string
		want         error
	}{
		{"patterns at the limit", costSchema(pktype.MaxSchemaPatterns, distinct), nil},
		{"patterns one over", costSchema(pktype.MaxSchemaPatterns+1, distinct), pktype.ErrSchemaTooManyPatterns},
		{"a pattern repeated counts once", costSchema(pktype.MaxSchemaPatterns+300, func(i int) string { return distinct(i % pktype.MaxSchemaPatterns) }), nil},
		{"patternProperties count with patterns", `{"patternProperties":{"^zqxa$":{},"^zqxb$":{}},"allOf":[` +
			costSchema(pktype.MaxSchemaPatterns-1, distinct) + `]}`, pktype.ErrSchemaTooManyPatterns},
		{"regexp instructions at the limit", costSchema(pktype.MaxSchemaRegexpCost/1000, class), nil},
		{"regexp instructions over", costSchema(pktype.MaxSchemaRegexpCost/1000+1, class), pktype.ErrSchemaPatternsTooLarge},
		{"one huge pattern", `{"pattern":"` + strings.Repeat("[a-z]{999}", 1000) + `"}`, pktype.ErrSchemaPatternsTooLarge},
		{"resources at the limit", costSchema(pktype.MaxSchemaResources, id), nil},
		{"resources one over", costSchema(pktype.MaxSchemaResources+1, id), pktype.ErrSchemaTooManyResources},
		{"anchors count as resources", costSchema(pktype.MaxSchemaResources+1, func(i int) string {
			return fmt.Sprintf(`{"%s":"zqx%d"}`, []string{"$anchor", "$dynamicAnchor", "id"}[i%3], i)
		}), pktype.ErrSchemaTooManyResources},
		{"over both: resources first", costSchema(pktype.MaxSchemaPatterns+1, func(i int) string {
			return fmt.Sprintf(`{"$id":"zqx%d","pattern":"^zqx%d$"}`, i, i)
		}), pktype.ErrSchemaTooManyResources},
		// Values that are not subschemas: examples, enums, defaults, and
		// properties named like keywords (whose values are schemas).
		{"keywords in values do not count", `{"properties":{"$id":{"type":"string"},"pattern":{"type":"string"}},` +
			`"enum":[` + strings.TrimSuffix(strings.Repeat(`{"$id":"zqx","pattern":"zqx"},`, 2*pktype.MaxSchemaPatterns), ",") + `],` +
			`"examples":[` + strings.TrimSuffix(strings.Repeat(`{"$anchor":"zqx"},`, 2*pktype.MaxSchemaResources), ",") + `],` +
			`"default":{"patternProperties":{` + strings.TrimSuffix(strings.Repeat(`"[a-z]{999}":{},`, 20), ",") + `}}}`, nil},
		{"invalid patterns are the compiler's to report", `{"pattern":"(zqx"}`, nil},
	} {
		if err := pktype.CheckSchemaShape([]byte(c.schema)); err != nil {
			t.Fatalf("%s: the shape is over a limit: %v", c.name, err)
		}
		err := pktype.CheckSchemaCost([]byte(c.schema))
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "zqx") || strings.Contains(err.Error(), "{999}")) {
			t.Errorf("%s: the error quotes the schema: %v", c.name, err)
		}
	}
	if err := pktype.CheckSchemaCost([]byte(`{"a":`)); err == nil || strings.Contains(err.Error(), `"a"`) {
		t.Errorf("not JSON: %v", err)
	}
}

// TestRegexpCost: repetitions expand; past the limit the count stops.
func TestRegexpCost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern string
		limit   int
		want    int
	}{
		{"abc", 100, 3},
		{"[a-z]{999}", 10_000, 1000},
		{"([a-z]{30}){30}", 10_000, 961},
		{"([a-z]{30}){30}", 500, 501},
		{"[a-z]{999}[a-z]{999}", 1500, 1501},
	} {
		got, err := pktype.RegexpCost(c.pattern, c.limit)
		if err != nil || got != c.want {
			t.Errorf("RegexpCost(%q, %d) = %d, %v; want %d", c.pattern, c.limit, got, err, c.want)
		}
	}
	if _, err := pktype.RegexpCost("(", 10); err == nil {
		t.Error("RegexpCost of an invalid pattern: no error")
	}
}
