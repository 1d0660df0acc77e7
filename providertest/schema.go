package providertest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// maxDepth stops recursive schemas that can never bottom out.
	maxDepth = 64
	// optionalDepth is the nesting below which optional properties and a
	// first array item are still generated; deeper, only what the schema
	// requires is, so recursive optional structures terminate.
	optionalDepth = 6
)

// exampler generates example instances; root resolves local $refs.
type exampler struct{ root any }

// exampleFor returns a best-effort JSON value (as produced by encoding/json)
// that validates against schema. It covers the keywords structured-output
// schemas use in practice; constructs it does not know are ignored.
func exampleFor(schema any) any {
	g := exampler{root: schema}
	return g.gen(schema, 0)
}

func (g *exampler) gen(s any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	m, ok := s.(map[string]any)
	if !ok {
		// true accepts anything and false nothing, so any value will do.
		return "example"
	}
	m = g.normalize(m, depth)
	if v, ok := m["const"]; ok {
		return v
	}
	enum, _ := m["enum"].([]any)
	if v, ok := m["default"]; ok && (enum == nil || containsJSON(enum, v)) {
		return v
	}
	if len(enum) > 0 {
		return enum[0]
	}
	switch schemaType(m) {
	case "null":
		return nil
	case "boolean":
		return true
	case "integer":
		return genNumber(m, true)
	case "number":
		return genNumber(m, false)
	case "array":
		return g.genArray(m, depth)
	case "object":
		return g.genObject(m, depth)
	case "string":
		return genString(m)
	}
	return "example"
}

// normalize folds $ref, allOf, anyOf and oneOf into one flat schema, so
// the generators only see plain keywords.
func (g *exampler) normalize(m map[string]any, depth int) map[string]any {
	for range maxDepth {
		if depth > maxDepth {
			return m
		}
		if ref, ok := m["$ref"].(string); ok {
			m = merge(without(m, "$ref"), asMap(g.resolve(ref)))
			continue
		}
		if subs, ok := m["allOf"].([]any); ok {
			out := without(m, "allOf")
			for _, sub := range subs {
				out = merge(out, g.normalize(asMap(sub), depth+1))
			}
			m = out
			continue
		}
		var key string
		for _, k := range []string{"anyOf", "oneOf"} {
			if _, ok := m[k].([]any); ok {
				key = k
				break
			}
		}
		if key == "" {
			return m
		}
		m = merge(without(m, key), g.pickBranch(m[key].([]any), depth))
	}
	return m
}

// pickBranch returns the first branch that allows something besides null,
// which makes a more useful example than null; else the first branch.
func (g *exampler) pickBranch(branches []any, depth int) map[string]any {
	if len(branches) == 0 {
		return map[string]any{}
	}
	for _, b := range branches {
		n := g.normalize(asMap(b), depth+1)
		if schemaType(n) != "null" {
			return n
		}
	}
	return g.normalize(asMap(branches[0]), depth+1)
}

// resolve follows a local JSON-pointer reference such as "#/$defs/x";
// other references resolve to the empty schema.
func (g *exampler) resolve(ref string) any {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return map[string]any{}
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	cur := g.root
	if frag == "" {
		return cur
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return map[string]any{}
			}
			cur = c[i]
		default:
			return map[string]any{}
		}
	}
	if cur == nil {
		return map[string]any{}
	}
	return cur
}

// schemaType picks the type to generate: the first non-null declared type,
// else one inferred from the keywords present.
func schemaType(m map[string]any) string {
	types := typesOf(m["type"])
	for _, t := range types {
		if t != "null" {
			return t
		}
	}
	if len(types) > 0 {
		return "null"
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := m[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"):
		return "array"
	case has("minLength", "maxLength", "pattern", "format"):
		return "string"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return ""
}

func typesOf(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// genNumber tries a few natural candidates (1, 0, the bounds and values
// next to them) and returns the first that meets every numeric keyword.
func genNumber(m map[string]any, integer bool) any {
	lo, hi := math.Inf(-1), math.Inf(1)
	loEx, hiEx := false, false
	if v, ok := num(m["minimum"]); ok {
		lo = v
	}
	if v, ok := num(m["maximum"]); ok {
		hi = v
	}
	// exclusiveMinimum is a number since draft 6 and a flag in draft 4.
	if v, ok := num(m["exclusiveMinimum"]); ok && v >= lo {
		lo, loEx = v, true
	} else if b, _ := m["exclusiveMinimum"].(bool); b {
		loEx = true
	}
	if v, ok := num(m["exclusiveMaximum"]); ok && v <= hi {
		hi, hiEx = v, true
	} else if b, _ := m["exclusiveMaximum"].(bool); b {
		hiEx = true
	}
	mult, hasMult := num(m["multipleOf"])
	hasMult = hasMult && mult > 0

	cands := []float64{1, 0}
	finite := func(x float64) bool { return !math.IsInf(x, 0) }
	if finite(lo) {
		cands = append(cands, lo, math.Floor(lo)+1, math.Ceil(lo), lo+1)
		if hasMult {
			k := math.Ceil(lo / mult)
			cands = append(cands, k*mult, (k+1)*mult)
		}
	}
	if finite(hi) {
		cands = append(cands, hi, math.Ceil(hi)-1, math.Floor(hi), hi-1)
		if hasMult {
			k := math.Floor(hi / mult)
			cands = append(cands, k*mult, (k-1)*mult)
		}
	}
	if finite(lo) && finite(hi) {
		mid := (lo + hi) / 2
		cands = append(cands, mid, math.Floor(mid), math.Ceil(mid))
	}
	for _, x := range cands {
		switch {
		case x < lo || (loEx && x == lo), x > hi || (hiEx && x == hi):
		case integer && x != math.Trunc(x):
		case hasMult && !isMultiple(x, mult):
		default:
			if integer {
				return int64(x)
			}
			return x
		}
	}
	if integer {
		return int64(0)
	}
	return 0.0
}

func isMultiple(x, m float64) bool {
	q := x / m
	return math.Abs(q-math.Round(q)) < 1e-9
}

// formatExamples are valid values for the formats JSON Schema defines.
var formatExamples = map[string]string{
	"date-time":             "2024-01-01T00:00:00Z",
	"date":                  "2024-01-01",
	"time":                  "00:00:00Z",
	"duration":              "P1D",
	"email":                 "user@example.com",
	"idn-email":             "user@example.com",
	"hostname":              "example.com",
	"idn-hostname":          "example.com",
	"ipv4":                  "192.0.2.1",
	"ipv6":                  "2001:db8::1",
	"uri":                   "https://example.com/",
	"iri":                   "https://example.com/",
	"uri-reference":         "/example",
	"iri-reference":         "/example",
	"uri-template":          "https://example.com/{id}",
	"uuid":                  "123e4567-e89b-42d3-a456-426614174000",
	"json-pointer":          "/example",
	"relative-json-pointer": "0/example",
	"regex":                 "^example$",
}

// genString returns the format example (or "example"), made to match any
// pattern and fitted to minLength/maxLength.
func genString(m map[string]any) string {
	format, _ := m["format"].(string)
	base, ok := formatExamples[format]
	if !ok {
		base = "example"
	}
	minL, hasMin := num(m["minLength"])
	maxL, hasMax := num(m["maxLength"])
	fits := func(s string) bool {
		n := float64(utf8.RuneCountInString(s))
		return (!hasMin || n >= minL) && (!hasMax || n <= maxL)
	}
	fit := func(s string) string {
		r := []rune(s)
		if len(r) == 0 {
			r = []rune("x")
		}
		for hasMin && float64(len(r)) < minL {
			r = append(r, r...)
		}
		if hasMin && float64(len(r)) > minL && !hasMax {
			r = r[:int(minL)] // keep padded strings short
		}
		if hasMax && float64(len(r)) > maxL {
			r = r[:int(max(maxL, 0))]
		}
		return string(r)
	}

	pattern, _ := m["pattern"].(string)
	re, err := regexp.Compile(pattern)
	if pattern == "" || err != nil {
		if fits(base) {
			return base
		}
		return fit(base)
	}
	if re.MatchString(base) && fits(base) {
		return base
	}
	// Grow repetitions until the length fits: x+ yields more x's each time.
	if parsed, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		limit := 1
		if hasMin {
			limit += int(minL)
		}
		for extra := range limit + 1 {
			var b strings.Builder
			genRegexp(&b, parsed.Simplify(), extra)
			if s := b.String(); re.MatchString(s) && fits(s) {
				return s
			}
		}
	}
	// Regexps are not anchored by default, so a match may hide inside a
	// padded string too.
	if s := fit(base); re.MatchString(s) {
		return s
	}
	return fit(base)
}

// genRegexp writes a string matching re, repeating starred and plussed
// subexpressions extra more times than the minimum.
func genRegexp(b *strings.Builder, re *syntax.Regexp, extra int) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				r = []rune(strings.ToLower(string(r)))[0]
			}
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		b.WriteRune(pickRune(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
	case syntax.OpCapture:
		genRegexp(b, re.Sub[0], extra)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			genRegexp(b, sub, extra)
		}
	case syntax.OpAlternate:
		genRegexp(b, re.Sub[0], extra)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		n := lo + extra
		if hi >= 0 && n > hi {
			n = hi
		}
		for range n {
			genRegexp(b, re.Sub[0], extra)
		}
	}
	// Anchors, word boundaries and empty matches add nothing.
}

// pickRune chooses a readable rune from a character class given as
// [lo, hi] pairs.
func pickRune(ranges []rune) rune {
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= r && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	for _, r := range "aA0x_-. " {
		if in(r) {
			return r
		}
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i+1] >= '!' {
			return max(ranges[i], '!')
		}
	}
	if len(ranges) > 0 {
		return ranges[0]
	}
	return 'a'
}

func (g *exampler) genArray(m map[string]any, depth int) []any {
	var prefix []any
	item := any(map[string]any{})
	noExtra := false
	switch it := m["items"].(type) {
	case []any: // draft 4-2019 tuple form
		prefix = it
		if ai, ok := m["additionalItems"]; ok {
			item = ai
		}
	case nil:
	default:
		item = it
	}
	if p, ok := m["prefixItems"].([]any); ok {
		prefix = p
	}
	if b, ok := item.(bool); ok && !b {
		noExtra = true
	}

	n, _ := num(m["minItems"])
	count := int(n)
	if depth < optionalDepth {
		count = max(count, len(prefix), 1)
	}
	contains, hasContains := m["contains"]
	if hasContains {
		count = max(count, 1)
	}
	if noExtra {
		count = min(count, len(prefix))
	}
	if maxI, ok := num(m["maxItems"]); ok {
		count = min(count, int(max(maxI, 0)))
	}

	out := make([]any, count)
	schemas := make([]any, count)
	for i := range out {
		switch {
		case i < len(prefix):
			schemas[i] = prefix[i]
		case hasContains && i == len(prefix):
			schemas[i] = merge(asMap(item), asMap(contains))
		default:
			schemas[i] = item
		}
		out[i] = g.gen(schemas[i], depth+1)
	}
	if unique, _ := m["uniqueItems"].(bool); unique {
		for i := 1; i < len(out); i++ {
			if containsJSON(out[:i], out[i]) {
				out[i] = g.vary(schemas[i], out[i], out[:i], depth+1)
			}
		}
	}
	return out
}

// vary finds a value for schema differing from every value in taken,
// starting from v; it gives up (returning v) when it cannot.
func (g *exampler) vary(schema, v any, taken []any, depth int) any {
	m := g.normalize(asMap(schema), depth)
	if enum, ok := m["enum"].([]any); ok {
		for _, e := range enum {
			if !containsJSON(taken, e) {
				return e
			}
		}
		return v
	}
	for k := 1; k <= len(taken)+1; k++ {
		var c any
		switch x := v.(type) {
		case string:
			suffix := strconv.Itoa(k)
			r := []rune(x)
			if maxL, ok := num(m["maxLength"]); ok && len(r)+len(suffix) > int(maxL) {
				r = r[:max(int(maxL)-len(suffix), 0)]
			}
			c = string(r) + suffix
		case int64:
			step := int64(1)
			if mult, ok := num(m["multipleOf"]); ok && mult >= 1 {
				step = int64(mult)
			}
			c = x + int64(k)*step
		case float64:
			c = x + float64(k)
		case bool:
			c = !x
		default:
			return v
		}
		if !containsJSON(taken, c) {
			return c
		}
	}
	return v
}

func (g *exampler) genObject(m map[string]any, depth int) map[string]any {
	props, _ := m["properties"].(map[string]any)
	required := typesOf(m["required"]) // a list of strings, like type arrays
	out := make(map[string]any)
	for k, ps := range props {
		if depth < optionalDepth || slices.Contains(required, k) {
			out[k] = g.gen(ps, depth+1)
		}
	}
	for _, k := range required {
		if _, ok := out[k]; !ok {
			out[k] = g.gen(g.extraSchema(m, k), depth+1)
		}
	}
	// dependentRequired: present properties may demand others.
	if deps, ok := m["dependentRequired"].(map[string]any); ok {
		for k, d := range deps {
			if _, present := out[k]; !present {
				continue
			}
			for _, dk := range typesOf(d) {
				if _, ok := out[dk]; !ok {
					out[dk] = g.gen(g.extraSchema(m, dk), depth+1)
				}
			}
		}
	}
	if minP, ok := num(m["minProperties"]); ok {
		closed := false
		if b, ok := m["additionalProperties"].(bool); ok && !b {
			closed = true
		}
		for i := 1; !closed && float64(len(out)) < minP && i < int(minP)+len(out)+2; i++ {
			k := fmt.Sprintf("property%d", i)
			if _, ok := out[k]; !ok {
				out[k] = g.gen(g.extraSchema(m, k), depth+1)
			}
		}
	}
	if maxP, ok := num(m["maxProperties"]); ok && float64(len(out)) > maxP {
		keys := make([]string, 0, len(out))
		for k := range out {
			if !slices.Contains(required, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for i := len(keys) - 1; i >= 0 && float64(len(out)) > maxP; i-- {
			delete(out, keys[i])
		}
	}
	return out
}

// extraSchema is the schema for a property not listed in "properties".
func (g *exampler) extraSchema(m map[string]any, key string) any {
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		for p, s := range pp {
			if re, err := regexp.Compile(p); err == nil && re.MatchString(key) {
				return s
			}
		}
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		return ap
	}
	if props, ok := m["properties"].(map[string]any); ok {
		if s, ok := props[key]; ok {
			return s
		}
	}
	return map[string]any{}
}

// merge combines two schemas as allOf would: property sets and required
// lists are united, types intersected, bounds tightened; for other
// keywords a wins.
func merge(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, bv := range b {
		av, ok := out[k]
		if !ok {
			out[k] = bv
			continue
		}
		switch k {
		case "properties":
			ap, aok := av.(map[string]any)
			bp, bok := bv.(map[string]any)
			if !aok || !bok {
				continue
			}
			props := make(map[string]any, len(ap)+len(bp))
			for pk, pv := range ap {
				props[pk] = pv
			}
			for pk, pv := range bp {
				if prev, ok := props[pk]; ok {
					props[pk] = map[string]any{"allOf": []any{prev, pv}}
				} else {
					props[pk] = pv
				}
			}
			out[k] = props
		case "required":
			req := slices.Clone(asSlice(av))
			for _, r := range asSlice(bv) {
				if !slices.Contains(req, r) {
					req = append(req, r)
				}
			}
			out[k] = req
		case "type":
			if t := intersectTypes(typesOf(av), typesOf(bv)); len(t) > 0 {
				out[k] = t
			}
		case "enum":
			var both []any
			for _, e := range asSlice(av) {
				if containsJSON(asSlice(bv), e) {
					both = append(both, e)
				}
			}
			if len(both) > 0 {
				out[k] = both
			}
		case "minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties":
			x, xok := num(av)
			y, yok := num(bv)
			if xok && yok {
				out[k] = max(x, y)
			}
		case "maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties":
			x, xok := num(av)
			y, yok := num(bv)
			if xok && yok {
				out[k] = min(x, y)
			}
		}
	}
	return out
}

func intersectTypes(a, b []string) []any {
	var out []any
	add := func(t string) {
		if !slices.Contains(out, any(t)) {
			out = append(out, t)
		}
	}
	for _, x := range a {
		for _, y := range b {
			switch {
			case x == y:
				add(x)
			case x == "integer" && y == "number", x == "number" && y == "integer":
				add("integer")
			}
		}
	}
	return out
}

func without(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// asMap treats booleans and non-schemas as the empty schema.
func asMap(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// num reads a JSON number decoded by encoding/json, with or without
// UseNumber, or a Go number from a hand-built schema.
func num(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// containsJSON reports whether v equals an element of list as JSON, so
// 1, 1.0 and json.Number("1") compare equal.
func containsJSON(list []any, v any) bool {
	vb, err := json.Marshal(v)
	if err != nil {
		return false
	}
	for _, e := range list {
		if eb, err := json.Marshal(e); err == nil && string(eb) == string(vb) {
			return true
		}
	}
	return false
}
