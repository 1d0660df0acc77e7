package promptkit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// BenchmarkCompileSchemaWorst compiles the costliest schemas
// pktype.CheckSchemaShape and the pattern budget let through, to measure
// what the limits bound: compiling is quadratic in depth and in the
// number of subschemas, and cannot be interrupted.
func BenchmarkCompileSchemaWorst(b *testing.B) {
	const depth, nodes = pktype.MaxSchemaDepth, pktype.MaxSchemaNodes
	chain := func(key string, n int) string { // n objects deep
		return strings.Repeat(`{"`+key+`":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
	}
	anyOf := func(n int, item func(i int) string) string { // 1 + n × item's objects
		items := make([]string, n)
		for i := range items {
			items[i] = item(i)
		}
		return `{"anyOf":[` + strings.Join(items, ",") + `]}`
	}
	// Below anyOf's object and array, a chain may be depth-2 deep.
	const long = depth - 2
	shapes := []struct{ name, schema string }{
		{"deepest", chain("items", depth)},
		{"widest", anyOf(nodes-1, func(int) string { return "{}" })},
		{"widest_booleans", anyOf(nodes-1, func(int) string { return "true" })},
		{"widest_at_max_depth", anyOf((nodes-1)/long, func(int) string { return chain("items", long) })},
		{"resources", anyOf(nodes-1, func(i int) string { return fmt.Sprintf(`{"$id":"s%d","$anchor":"a","$dynamicAnchor":"d"}`, i) })},
		{"resources_at_max_depth", anyOf((nodes-1)/long, func(i int) string {
			return strings.Repeat(`{"$id":"r`+fmt.Sprint(i)+`/","items":`, long-1) + `{}` + strings.Repeat(`}`, long-1)
		})},
		{"resources_and_patterns_at_max_depth", anyOf((nodes-1)/long, func(i int) string {
			each := fmt.Sprintf(`{"$id":"r%d/","pattern":"[a-z]{%d}","items":`, i, maxRegexpCost/nodes-2)
			return strings.Repeat(each, long-1) + `{}` + strings.Repeat(`}`, long-1)
		})},
		{"refs_at_max_depth", func() string { // as many refs to the deepest subschema as fit
			ref := `{"$ref":"#/$defs/d` + strings.Repeat("/not", long-1) + `"}`
			n := min(nodes-long-1, (pktype.MaxSchemaBytes-1000)/(len(ref)+1))
			return `{"$defs":{"d":` + chain("not", long) + `},"anyOf":[` + strings.TrimSuffix(strings.Repeat(ref+",", n), ",") + `]}`
		}()},
		{"properties", func() string {
			props := make([]string, nodes-2)
			for i := range props {
				props[i] = fmt.Sprintf(`"p%d":{"type":"string"}`, i)
			}
			return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
		}()},
		{"largest", `{"description":"` + strings.Repeat("x", pktype.MaxSchemaBytes-18) + `"}`},
		{"one_pattern_at_budget", `{"pattern":"` + strings.Repeat("[a-z]{999}", maxRegexpCost/1001) + `"}`},
		{"many_patterns_at_budget", anyOf(nodes-1, func(i int) string {
			return fmt.Sprintf(`{"pattern":"^[a-z]{%d}$"}`, 1+i%(maxRegexpCost/(nodes-1)))
		})},
	}
	for _, s := range shapes {
		if err := pktype.CheckSchemaShape([]byte(s.schema)); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		b.Run(s.name, func(b *testing.B) {
			b.ReportMetric(float64(len(s.schema)), "bytes")
			for b.Loop() {
				if _, err := compileSchema("promptkit:///bench.json", json.RawMessage(s.schema)); err != nil {
					b.Fatalf("%.200v", err)
				}
			}
		})
	}
}
