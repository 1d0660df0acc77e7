package pktype

import (
	"encoding/json"
	"fmt"
	"regexp/syntax"
)

// Limits on what compiling a schema costs beyond its shape (see
// CheckSchemaShape), applied where a schema that will be compiled
// arrives (a request's output schema, a chat's response_format, a prompt
// file's schemas; not a tool's parameters, which only the backend
// reads). Within the shape limits, 1,500 distinct patterns took 0.16 s
// per compile and 2,047 $id resources 0.22 s (issue 40); within these,
// the worst schema takes about 60 ms (BenchmarkCompileSchemaWorst).
const (
	// MaxSchemaPatterns bounds the distinct regular expressions of a
	// schema (pattern values and patternProperties names): each is a
	// compile of its own, about 25 µs however short. A pattern repeated
	// counts once.
	MaxSchemaPatterns = 256
	// MaxSchemaRegexpCost bounds their summed size in regexp
	// instructions (see RegexpCost). Go's regexp compiles in time
	// linear in it, but a pattern of a few kilobytes can expand to
	// millions: "[a-z]{999}" repeated 600 times took over a second and
	// hundreds of megabytes. Realistic patterns cost tens, "^.{0,1000}$"
	// a thousand.
	MaxSchemaRegexpCost = 10_000
	// MaxSchemaResources bounds the keywords that make a subschema a
	// resource or an anchor ($id, draft 4's id, $anchor,
	// $dynamicAnchor): compiling is quadratic in them. A response
	// format has a handful, or none.
	MaxSchemaResources = 64
)

// Errors of CheckSchemaCost, one per limit, worded as CheckSchemaShape's.
var (
	ErrSchemaTooManyPatterns  = fmt.Errorf("has more than %d distinct patterns (pattern and patternProperties together)", MaxSchemaPatterns)
	ErrSchemaPatternsTooLarge = fmt.Errorf("has patterns too large to compile (together over %d regexp instructions, about one per character matched)", MaxSchemaRegexpCost)
	ErrSchemaTooManyResources = fmt.Errorf("has more than %d $id, $anchor and $dynamicAnchor keywords", MaxSchemaResources)
)

// CheckSchemaCost checks that the schema raw, which passed
// CheckSchemaShape, is within MaxSchemaResources, MaxSchemaPatterns and
// MaxSchemaRegexpCost; the error then matches ErrSchemaTooManyResources,
// ErrSchemaTooManyPatterns or ErrSchemaPatternsTooLarge (checked in that
// order). It counts only where a subschema can be (the union of every
// draft's places: properties, items, anyOf, ...), so that an "$id" or a
// "pattern" inside an example or an enum value does not count. An
// invalid pattern is left to the compiler, as is anything else that is
// not a valid schema. Errors never quote the document.
func CheckSchemaCost(raw []byte) error {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return notJSON(err)
	}
	return SchemaCost(doc)
}

// SchemaCost is CheckSchemaCost of a decoded document (as encoding/json
// or a JSON Schema library decodes it: maps, slices, strings).
func SchemaCost(doc any) error {
	var c schemaCost
	c.patterns = map[string]bool{}
	c.walk(doc)
	switch {
	case c.resources > MaxSchemaResources:
		return ErrSchemaTooManyResources
	case len(c.patterns) > MaxSchemaPatterns:
		return ErrSchemaTooManyPatterns
	case c.spent > MaxSchemaRegexpCost:
		return ErrSchemaPatternsTooLarge
	}
	return nil
}

type schemaCost struct {
	resources int
	patterns  map[string]bool
	spent     int
}

// pattern counts p once; past either pattern limit it stops working out
// costs, so the work stays bounded whatever the document holds.
func (c *schemaCost) pattern(p string) {
	if c.patterns[p] || len(c.patterns) > MaxSchemaPatterns {
		return
	}
	c.patterns[p] = true
	if c.spent <= MaxSchemaRegexpCost {
		cost, _ := RegexpCost(p, MaxSchemaRegexpCost-c.spent)
		c.spent += cost
	}
}

func (c *schemaCost) walk(v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	for key, sub := range obj {
		switch key {
		case "$id", "id", "$anchor", "$dynamicAnchor":
			if _, ok := sub.(string); ok {
				c.resources++
			}
		case "pattern":
			if p, ok := sub.(string); ok {
				c.pattern(p)
			}
		case "not", "additionalProperties", "additionalItems", "propertyNames", "contains", "if", "then", "else",
			"unevaluatedProperties", "unevaluatedItems", "contentSchema":
			c.walk(sub)
		case "items", "allOf", "anyOf", "oneOf", "prefixItems":
			if list, ok := sub.([]any); ok {
				for _, s := range list {
					c.walk(s)
				}
			} else {
				c.walk(sub)
			}
		case "properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies":
			if m, ok := sub.(map[string]any); ok {
				for name, s := range m {
					if key == "patternProperties" {
						c.pattern(name)
					}
					c.walk(s)
				}
			}
		}
	}
}

// RegexpCost parses the pattern p (Go's syntax, as JSON Schema
// validators in Go compile it) and estimates the instructions it
// compiles to, with repetitions expanded, stopping once past limit
// (then it returns more than limit). The error is the pattern's syntax
// error.
func RegexpCost(p string, limit int) (int, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0, err
	}
	return regexpCost(re, limit), nil
}

func regexpCost(re *syntax.Regexp, limit int) int {
	cost := 1
	switch re.Op {
	case syntax.OpLiteral:
		cost = max(len(re.Rune), 1)
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min
		}
		sub := regexpCost(re.Sub[0], limit)
		if n > 0 && sub > limit/n {
			return limit + 1
		}
		return 1 + max(n, 1)*sub
	}
	for _, sub := range re.Sub {
		if cost > limit {
			break
		}
		cost += regexpCost(sub, limit-cost)
	}
	return cost
}
