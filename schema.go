package promptkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/promptkit/promptkit/pktype"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// compiledSchema validates JSON instances against one JSON Schema.
type compiledSchema struct {
	schema *jsonschema.Schema
}

// compileSchema compiles raw. References are resolved only within the
// document: no file or network loading. Errors say what is wrong in the
// schema's own terms (the location of the offending keyword and the rule
// it breaks), never with the internal URL the schema is compiled under.
//
// Compiling cannot be interrupted, so its cost is bounded instead: raw
// must pass pktype.CheckSchemaShape, then pktype.SchemaCost (patterns,
// $id resources: what the shape does not bound). A schema compiled
// before under the same url comes from a small cache: a request's schema
// is compiled when it is checked at submission and again when it runs,
// and clients tend to send the same schema with every request.
func compileSchema(url string, raw json.RawMessage) (*compiledSchema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	key := schemaKey(url, raw)
	if s := compiled.get(key); s != nil {
		return s, nil
	}
	s, err := compileNew(url, raw)
	if err == nil {
		compiled.put(key, s, len(raw))
	}
	return s, err
}

// compileNew is compileSchema without the cache.
func compileNew(url string, raw json.RawMessage) (*compiledSchema, error) {
	if err := pktype.CheckSchemaShape(raw); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", jsonErrorKind(err))
	}
	if err := pktype.SchemaCost(doc); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	budget := regexpBudget{seen: map[string]regexpResult{}}
	c.UseRegexpEngine(budget.compile)
	if err := c.AddResource(url, doc); err != nil {
		return nil, schemaError(url, err)
	}
	s, err := c.Compile(url)
	// The compiled schema keeps the engine for "format": "regex" (see
	// regexpBudget.compile); from now on it is shared.
	budget.seen, budget.done = nil, true
	if budget.err != nil {
		return nil, budget.err
	}
	if err != nil {
		return nil, schemaError(url, err)
	}
	return &compiledSchema{schema: s}, nil
}

// isSchemaLimit reports whether err is the refusal of a schema over one
// of the limits on its cost (pktype.CheckSchemaShape's or
// pktype.SchemaCost's), whose words quote nothing of it.
func isSchemaLimit(err error) bool {
	for _, limit := range []error{pktype.ErrSchemaTooDeep, pktype.ErrSchemaTooLarge, pktype.ErrSchemaTooManyNodes,
		pktype.ErrSchemaTooManyResources, pktype.ErrSchemaTooManyPatterns, pktype.ErrSchemaPatternsTooLarge} {
		if errors.Is(err, limit) {
			return true
		}
	}
	return false
}

// regexpResult is a pattern compiled once in a compile.
type regexpResult struct {
	re  jsonschema.Regexp
	err error
}

// regexpBudget is the regexp engine of one compile. pktype.SchemaCost has
// bounded the patterns where it looks; this bounds whatever the compiler
// asks for the same way, should it look elsewhere: past
// pktype.MaxSchemaPatterns or pktype.MaxSchemaRegexpCost summed it
// refuses, and err says which. The compiler asks for each pattern twice
// (checking the schema against the metaschema, then compiling it), and a
// schema may repeat one, so a pattern is compiled and counted once.
//
// The compiled schema keeps the engine to check strings whose format is
// "regex" (drafts before 2019-09 assert formats), from any goroutine:
// once done, a call shares nothing and each string has a budget of its
// own.
type regexpBudget struct {
	seen  map[string]regexpResult
	spent int
	err   error
	done  bool
}

func (b *regexpBudget) compile(s string) (jsonschema.Regexp, error) {
	const limit = pktype.MaxSchemaRegexpCost
	if b.done {
		return compileRegexp(s, limit)
	}
	if r, ok := b.seen[s]; ok {
		return r.re, r.err
	}
	if b.err != nil {
		return nil, b.err // refused already: no more work
	}
	if len(b.seen) >= pktype.MaxSchemaPatterns {
		b.err = pktype.ErrSchemaTooManyPatterns
		return nil, b.err
	}
	cost, err := pktype.RegexpCost(s, limit-b.spent)
	if err == nil && cost > limit-b.spent {
		b.err = pktype.ErrSchemaPatternsTooLarge
		return nil, b.err
	}
	var r regexpResult
	if r.err = err; err == nil {
		b.spent += cost
		r.re, r.err = regexp.Compile(s)
	}
	b.seen[s] = r
	return r.re, r.err
}

// compileRegexp compiles s if it costs at most limit.
func compileRegexp(s string, limit int) (jsonschema.Regexp, error) {
	cost, err := pktype.RegexpCost(s, limit)
	if err != nil {
		return nil, err
	}
	if cost > limit {
		return nil, pktype.ErrSchemaPatternsTooLarge
	}
	return regexp.Compile(s)
}

// schemaError rewrites a compiler error: a schema that breaks the JSON
// Schema rules becomes "not a valid JSON Schema: at /type: ...", a remote
// $ref says that only local ones work, and the compile URL is dropped from
// anything else. Schemas are configuration, so their values may be quoted.
func schemaError(url string, err error) error {
	var se *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &se) && errors.As(se.Err, &ve) {
		return fmt.Errorf("not a valid JSON Schema: %s", strings.Join(explain(ve, true), "; "))
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		return fmt.Errorf(`$ref %q cannot be resolved: a schema may refer only to its own parts (such as "#/$defs/name")`, le.URL)
	}
	msg := strings.ReplaceAll(err.Error(), url, "")
	return errors.New(strings.ReplaceAll(msg, `""`, `"#"`))
}

// validateJSON parses text as one JSON value and validates it. It returns
// the parsed document (re-encoded compactly) and the diagnostics when the
// value is rejected. An error means validation could not run.
func (s *compiledSchema) validateJSON(text string) (json.RawMessage, []string, error) {
	body := stripCodeFence(text)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		return nil, []string{"output is not a single JSON value: " + jsonErrorKind(err)}, nil
	}
	if err := s.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, nil, err
		}
		return nil, diagnostics(ve), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(body)); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), nil, nil
}

// validateValue validates an in-memory Go value (run inputs). The
// problems it returns name locations (keys and indexes), keywords and the
// schema's own values, never the instance's values: inputs can be secret.
func (s *compiledSchema) validateValue(v any) ([]string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if err := s.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		return explain(ve, false), nil
	}
	return nil, nil
}

// diagnostics flattens a validation error into "at /path: message" lines,
// leaves only, sorted, for a stable repair prompt.
func diagnostics(ve *jsonschema.ValidationError) []string {
	var out []string
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			out = append(out, fmt.Sprintf("at %s: %s", loc, u.Error.String()))
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.BasicOutput())
	sort.Strings(out)
	return out
}

// stripCodeFence returns the inside of a reply that is exactly one fenced
// code block (```json ... ```), which models often produce despite
// instructions; anything else is returned trimmed.
func stripCodeFence(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	inner := t[3 : len(t)-3]
	nl := strings.IndexByte(inner, '\n')
	if nl < 0 || strings.Contains(inner, "```") {
		return t
	}
	if lang := strings.TrimSpace(inner[:nl]); lang != "" && lang != "json" && lang != "JSON" {
		return t
	}
	return strings.TrimSpace(inner[nl+1:])
}

// jsonErrorKind describes a parse failure without quoting the input.
func jsonErrorKind(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return "invalid JSON"
}

// explain flattens a validation error into sorted, distinct
// "at /location: problem" lines, one per failed keyword. Of the branches
// of an anyOf or oneOf it keeps those that got furthest, so that
// `type: objectt` reports the list of type names rather than also "want
// array". withValues allows quoting the instance's values: true for a
// schema checked against the metaschema, false for run inputs.
func explain(ve *jsonschema.ValidationError, withValues bool) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			line := "at " + pointer(e.InstanceLocation) + ": " + describe(e.ErrorKind, withValues)
			if !seen[line] {
				seen[line] = true
				out = append(out, line)
			}
			return
		}
		causes := e.Causes
		switch e.ErrorKind.(type) {
		case *kind.AnyOf, *kind.OneOf:
			causes = bestBranches(e)
		}
		for _, c := range causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(out)
	return out
}

// bestBranches keeps the failed branches of an anyOf or oneOf whose
// failures lie deepest in the instance and, among those, drops branches
// that failed only because the value has another type, when a branch of
// the value's type failed for a more telling reason.
func bestBranches(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	depth := func(c *jsonschema.ValidationError) int {
		d := 0
		var walk func(*jsonschema.ValidationError)
		walk = func(v *jsonschema.ValidationError) {
			if len(v.Causes) == 0 {
				d = max(d, len(v.InstanceLocation))
			}
			for _, x := range v.Causes {
				walk(x)
			}
		}
		walk(c)
		return d
	}
	typeOnly := func(c *jsonschema.ValidationError) bool {
		only := true
		var walk func(*jsonschema.ValidationError)
		walk = func(v *jsonschema.ValidationError) {
			if len(v.Causes) == 0 {
				if _, ok := v.ErrorKind.(*kind.Type); !ok || len(v.InstanceLocation) != len(e.InstanceLocation) {
					only = false
				}
			}
			for _, x := range v.Causes {
				walk(x)
			}
		}
		walk(c)
		return only
	}
	best := -1
	for _, c := range e.Causes {
		best = max(best, depth(c))
	}
	var deepest, telling []*jsonschema.ValidationError
	for _, c := range e.Causes {
		if depth(c) == best {
			deepest = append(deepest, c)
			if !typeOnly(c) {
				telling = append(telling, c)
			}
		}
	}
	if len(telling) > 0 {
		return telling
	}
	return deepest
}

// pointer renders an instance location as a JSON Pointer ("/" for the
// whole value).
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	var b strings.Builder
	for _, s := range loc {
		b.WriteByte('/')
		b.WriteString(esc.Replace(s))
	}
	return b.String()
}

// describe says which rule a value breaks, naming the keyword. Property
// names and the schema's own values may appear; the instance's value only
// when withValues is set.
func describe(k jsonschema.ErrorKind, withValues bool) string {
	got := func(v any) string {
		if withValues {
			return display(v) + " "
		}
		return "value "
	}
	gotNum := func(r *big.Rat) string {
		if withValues {
			return rat(r) + " "
		}
		return "value "
	}
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("type: got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		return fmt.Sprintf("enum: %sis not one of %s", got(k.Got), clip(strings.Join(want, ", ")))
	case *kind.Const:
		return fmt.Sprintf("const: %sis not %s", got(k.Got), clip(display(k.Want)))
	case *kind.Format:
		if withValues && k.Err != nil {
			return fmt.Sprintf("format: %s is not a valid %s: %v", display(k.Got), k.Want, k.Err)
		}
		return fmt.Sprintf("format: %sis not a valid %s", got(k.Got), k.Want)
	case *kind.Required:
		return fmt.Sprintf("required: missing %s", properties(k.Missing))
	case *kind.Dependency:
		return fmt.Sprintf("dependencies: %s required when %q is present", properties(k.Missing), k.Prop)
	case *kind.DependentRequired:
		return fmt.Sprintf("dependentRequired: %s required when %q is present", properties(k.Missing), k.Prop)
	case *kind.AdditionalProperties:
		return fmt.Sprintf("additionalProperties: %s not allowed", properties(k.Properties))
	case *kind.PropertyNames:
		return fmt.Sprintf("propertyNames: property name %q is not allowed", k.Property)
	case *kind.MinProperties:
		return "minProperties: fewer than " + count(k.Want, "property", "properties")
	case *kind.MaxProperties:
		return "maxProperties: more than " + count(k.Want, "property", "properties")
	case *kind.MinItems:
		return "minItems: fewer than " + count(k.Want, "item", "items")
	case *kind.MaxItems:
		return "maxItems: more than " + count(k.Want, "item", "items")
	case *kind.AdditionalItems:
		return "additionalItems: " + count(k.Count, "item", "items") + " more than allowed"
	case *kind.UniqueItems:
		return fmt.Sprintf("uniqueItems: items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return "contains: no item matches"
	case *kind.MinContains:
		return "minContains: fewer than " + count(k.Want, "item matches", "items match") + " contains"
	case *kind.MaxContains:
		return "maxContains: more than " + count(k.Want, "item matches", "items match") + " contains"
	case *kind.MinLength:
		return "minLength: shorter than " + count(k.Want, "character", "characters")
	case *kind.MaxLength:
		return "maxLength: longer than " + count(k.Want, "character", "characters")
	case *kind.Pattern:
		return fmt.Sprintf("pattern: %sdoes not match %q", got(k.Got), k.Want)
	case *kind.ContentEncoding:
		return fmt.Sprintf("contentEncoding: not %s encoded", k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("contentMediaType: not of media type %s", k.Want)
	case *kind.ContentSchema:
		return "contentSchema: the decoded content does not satisfy it"
	case *kind.Minimum:
		return fmt.Sprintf("minimum: %sis less than %s", gotNum(k.Got), rat(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("maximum: %sis more than %s", gotNum(k.Got), rat(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("exclusiveMinimum: %sis not more than %s", gotNum(k.Got), rat(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("exclusiveMaximum: %sis not less than %s", gotNum(k.Got), rat(k.Want))
	case *kind.MultipleOf:
		return fmt.Sprintf("multipleOf: %sis not a multiple of %s", gotNum(k.Got), rat(k.Want))
	case *kind.OneOf:
		if len(k.Subschemas) >= 2 {
			return fmt.Sprintf("oneOf: matches subschemas %d and %d, want exactly one", k.Subschemas[0], k.Subschemas[1])
		}
		return "oneOf: matches none of the subschemas"
	case *kind.AnyOf:
		return "anyOf: matches none of the subschemas"
	case *kind.AllOf:
		return "allOf: fails a subschema"
	case *kind.Not:
		return `not: matches the schema "not" forbids`
	case *kind.FalseSchema:
		return "not allowed here (the schema is false)"
	case *kind.RefCycle:
		return fmt.Sprintf("$ref cycle between %s and %s", k.KeywordLocation1, k.KeywordLocation2)
	case *kind.InvalidJsonValue:
		return "not a JSON value"
	}
	if kw := k.KeywordPath(); len(kw) > 0 {
		return strings.Join(kw, "/") + ": not satisfied"
	}
	return "does not satisfy the schema"
}

// display renders a schema value (or, where allowed, an instance value)
// as JSON.
func display(v any) string {
	if r, ok := v.(*big.Rat); ok {
		return rat(r)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// clip bounds a quoted list of schema values.
func clip(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	i := limit
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// count says "1 item" or "2 items".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func properties(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return "property " + q[0]
	}
	return "properties " + strings.Join(q, ", ")
}

// rat renders a number from a schema or an instance without float noise.
func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
