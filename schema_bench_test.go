package promptkit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/pktype"
)

// BenchmarkCompileSchemaWorst compiles the costliest schemas
// pktype.CheckSchemaShape and compileSchema's own limits let through, to
// measure what the limits bound: compiling grows with the number of
// subschemas times their depth, with $id resources quadratically, and
// with each distinct pattern, and it cannot be interrupted. The cache is
// bypassed: each schema here would be a new request's. The refused_
// shapes measure what refusing a schema over a limit costs.
func BenchmarkCompileSchemaWorst(b *testing.B) {
	const depth, nodes = pktype.MaxSchemaDepth, pktype.MaxSchemaNodes
	const patterns, resources = pktype.MaxSchemaPatterns, pktype.MaxSchemaResources
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
	properties := func(n int, item func(i int) string) string { // 2 + n × item's objects
		props := make([]string, n)
		for i := range props {
			props[i] = fmt.Sprintf(`"p%d":%s`, i, item(i))
		}
		return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	}
	// pattern is the i-th of as many distinct patterns as allowed, which
	// together spend most of the regexp budget.
	pattern := func(i int) string {
		return fmt.Sprintf(`^[a-z]{%d}%d$`, pktype.MaxSchemaRegexpCost/patterns-9, i)
	}
	// Below anyOf's object and array, a chain may be depth-2 deep.
	const long = depth - 2
	const chains = (nodes - 1) / long
	shapes := []struct{ name, schema string }{
		{"deepest", chain("items", depth)},
		{"widest", anyOf(nodes-1, func(int) string { return "{}" })},
		{"widest_booleans", anyOf(nodes-1, func(int) string { return "true" })},
		{"widest_at_max_depth", anyOf(chains, func(int) string { return chain("items", long) })},
		{"properties", properties(nodes-2, func(int) string { return `{"type":"string"}` })},
		{"resources", anyOf(nodes-1, func(i int) string {
			if i < resources/3 {
				return fmt.Sprintf(`{"$id":"s%d","$anchor":"a","$dynamicAnchor":"d"}`, i)
			}
			return "{}"
		})},
		// Every level of the first chains a resource, as many as allowed.
		{"resources_at_max_depth", anyOf(chains, func(i int) string {
			if i < resources/long {
				return strings.Repeat(`{"$id":"r`+fmt.Sprint(i)+`/","items":`, long-1) + `{}` + strings.Repeat(`}`, long-1)
			}
			return chain("items", long)
		})},
		{"refs_at_max_depth", func() string { // as many refs to the deepest subschema as fit
			ref := `{"$ref":"#/$defs/d` + strings.Repeat("/not", long-1) + `"}`
			n := min(nodes-long-1, (pktype.MaxSchemaBytes-1000)/(len(ref)+1))
			return `{"$defs":{"d":` + chain("not", long) + `},"anyOf":[` + strings.TrimSuffix(strings.Repeat(ref+",", n), ",") + `]}`
		}()},
		{"largest", `{"description":"` + strings.Repeat("x", pktype.MaxSchemaBytes-18) + `"}`},
		{"one_pattern_at_budget", `{"pattern":"` + strings.Repeat("[a-z]{999}", pktype.MaxSchemaRegexpCost/1001) + `"}`},
		{"patterns_at_caps", properties(nodes-2, func(i int) string {
			if i < patterns {
				return fmt.Sprintf(`{"type":"string","pattern":%q}`, pattern(i))
			}
			return `{"type":"string"}`
		})},
		// Everything at once: chains at max depth whose levels hold
		// the resources and the patterns allowed.
		{"resources_and_patterns_at_max_depth", anyOf(chains, func(i int) string {
			var b strings.Builder
			for level := range long - 1 {
				k := i*long + level
				b.WriteString(`{`)
				if k < resources {
					fmt.Fprintf(&b, `"$id":"r%d/",`, k)
				}
				if k < patterns {
					fmt.Fprintf(&b, `"pattern":%q,`, pattern(k))
				}
				b.WriteString(`"items":`)
			}
			return b.String() + `{}` + strings.Repeat(`}`, long-1)
		})},
		// issue 40: 1,500 patterns in 85 KB took 0.16 s per compile;
		// within the node limit, as many distinct patterns as fit.
		{"refused_patterns", properties(nodes-2, func(i int) string {
			return fmt.Sprintf(`{"type":"string","pattern":"^[a-z]{1,25}%d$"}`, i)
		})},
		{"refused_resources", anyOf(nodes-1, func(i int) string { return fmt.Sprintf(`{"$id":"s%d"}`, i) })},
	}
	for _, s := range shapes {
		if err := pktype.CheckSchemaShape([]byte(s.schema)); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		refused := strings.HasPrefix(s.name, "refused_")
		b.Run(s.name, func(b *testing.B) {
			b.ReportMetric(float64(len(s.schema)), "bytes")
			cpu := testkit.StartCPU()
			for b.Loop() {
				_, err := compileNew("promptkit:///bench.json", json.RawMessage(s.schema))
				if refused != isSchemaLimit(err) || !refused && err != nil {
					b.Fatalf("%.200v", err)
				}
			}
			cpu.Report(b)
		})
	}
}
