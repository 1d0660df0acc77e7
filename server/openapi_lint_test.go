package server

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPILint checks offline what the Node tools that read the
// document check (@apidevtools/swagger-parser validate, @redocly/cli lint,
// openapi-typescript), so the document cannot regress without them:
//
//   - every operation documents a 4XX answer (redocly's
//     operation-4xx-response);
//   - every component is used: $ref'd from outside its own definition,
//     and not only from an x- extension, which no tool reads (redocly's
//     no-unused-components); a security scheme by a security requirement;
//   - every property a schema requires is defined: in its properties,
//     those of its allOf, anyOf and oneOf members, or those of a schema it
//     is a member, condition or branch of (redocly's
//     no-required-schema-properties-undefined, which does not look up to
//     the enclosing schema);
//   - a Media Type object holds only schema, example, examples, encoding
//     and extensions (the OpenAPI 3.1 schema swagger-parser validates
//     against);
//   - no optional property has a default: openapi-typescript makes a
//     property with one required in the types it writes.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	for _, p := range lintOpenAPI(oasDoc(t)) {
		t.Error(p)
	}
}

// TestOpenAPILintFails makes sure lintOpenAPI finds each problem.
func TestOpenAPILintFails(t *testing.T) {
	t.Parallel()
	obj := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	ok := obj("description", "d")
	op := func(responses map[string]any) map[string]any {
		return obj("paths", obj("/x", obj("get", obj("responses", responses))))
	}
	ref := func(ptr string) map[string]any { return obj("$ref", ptr) }
	for _, c := range []struct {
		name string
		doc  map[string]any
		want string
	}{
		{"no 4XX", op(obj("200", ok)), "no 4XX"},
		{"unused schema", merge(op(obj("404", ok)), obj("components", obj("schemas", obj("A", obj("type", "string"))))), "#/components/schemas/A is not used"},
		{"used only by itself", merge(op(obj("404", ok)), obj("components", obj("schemas", obj("A", obj("items", ref("#/components/schemas/A")))))), "#/components/schemas/A is not used"},
		{"used only in an extension", merge(op(obj("404", obj("description", "d", "x-data", ref("#/components/schemas/A")))),
			obj("components", obj("schemas", obj("A", obj("type", "string"))))), "#/components/schemas/A is not used"},
		{"unused security scheme", merge(op(obj("404", ok)), obj("components", obj("securitySchemes", obj("s", obj("type", "http"))))), "securitySchemes/s is not used"},
		{"required, not defined", op(obj("404", obj("description", "d", "content", obj("application/json", obj("schema",
			obj("type", "object", "required", []any{"a"}, "properties", obj("b", obj()))))))), `requires "a"`},
		{"media type description", op(obj("404", obj("description", "d", "content", obj("text/plain", obj("schema", obj(), "description", "x"))))), `media type text/plain has "description"`},
		{"optional default", op(obj("404", obj("description", "d", "content", obj("application/json", obj("schema",
			obj("type", "object", "properties", obj("n", obj("default", 3)))))))), `"n" has a default`},
	} {
		got := lintOpenAPI(c.doc)
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s: %q, want a problem containing %q", c.name, got, c.want)
		}
	}
	// What the rules allow: a 4XX range, a used component whose required
	// properties are its own, its allOf member's and, in a condition,
	// the enclosing schema's; a default on a required property.
	schemaA := obj("type", "object", "required", []any{"a", "b", "n"},
		"properties", obj("a", obj(), "n", obj("default", 1)),
		"allOf", []any{obj("properties", obj("b", obj())), obj("if", obj(), "then", obj("required", []any{"a"}))})
	answer := obj("description", "d", "content", obj("application/json", obj("schema", ref("#/components/schemas/A"))))
	good := merge(op(obj("4XX", answer)), obj("components", obj("schemas", obj("A", schemaA))))
	if got := lintOpenAPI(good); len(got) != 0 {
		t.Errorf("a good document: %q", got)
	}
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

var status4xx = regexp.MustCompile(`^4[0-9X][0-9X]$`)

// schemaLinks are the keys under which a schema holds subschemas that
// describe the same instance: a required property may be defined by the
// schema they are in.
var schemaLinks = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "if": true, "then": true, "else": true, "not": true}

// nameMaps are the keys whose value maps names (of properties,
// components, paths, headers) to objects: the names are not keywords.
var nameMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "dependentSchemas": true,
	"schemas": true, "responses": true, "parameters": true, "headers": true, "examples": true, "requestBodies": true,
	"securitySchemes": true, "paths": true, "links": true, "callbacks": true, "encoding": true, "variables": true}

// lintOpenAPI returns the document's problems (see TestOpenAPILint).
func lintOpenAPI(doc map[string]any) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	paths, _ := doc["paths"].(map[string]any)
	for _, path := range slices.Sorted(mapKeys(paths)) {
		item, _ := paths[path].(map[string]any)
		for _, m := range oasMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			responses, _ := op["responses"].(map[string]any)
			if !slices.ContainsFunc(slices.Collect(mapKeys(responses)), status4xx.MatchString) {
				add("%s %s documents no 4XX answer", strings.ToUpper(m), path)
			}
		}
	}

	// One walk: the $refs and where they are, security requirements,
	// and the schema and media type rules.
	type use struct{ ref, at string }
	var uses []use
	security := map[string]bool{}
	var walk func(v any, ptr string, chain []map[string]any, key string)
	walk = func(v any, ptr string, chain []map[string]any, key string) {
		switch x := v.(type) {
		case []any:
			for i, e := range x {
				walk(e, ptr+"/"+strconv.Itoa(i), chain, key)
			}
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				uses = append(uses, use{r, ptr})
			}
			if key == "security" {
				for name := range x {
					security[name] = true
				}
			}
			if key == "content" {
				for mt, m := range x {
					mo, _ := m.(map[string]any)
					for k := range mo {
						if !slices.Contains([]string{"schema", "example", "examples", "encoding"}, k) && !strings.HasPrefix(k, "x-") {
							add("%s: media type %s has %q, which a Media Type object may not", ptr, mt, k)
						}
					}
				}
			}
			// A schema is linked to the one before it in chain when it
			// sits under one of schemaLinks.
			if !schemaLinks[key] {
				chain = nil
			}
			chain = append(slices.Clip(chain), x)
			if req, ok := x["required"].([]any); ok {
				defined := map[string]bool{}
				for _, s := range chain {
					definedProperties(doc, s, defined, map[string]bool{})
				}
				for _, r := range req {
					if name, _ := r.(string); !defined[name] {
						add("%s requires %q, which it does not define", ptr, name)
					}
				}
			}
			if props, ok := x["properties"].(map[string]any); ok {
				req, _ := x["required"].([]any)
				for name, p := range props {
					if pm, ok := p.(map[string]any); ok && pm["default"] != nil && !slices.Contains(req, any(name)) {
						add("%s: the optional property %q has a default (openapi-typescript would make it required)", ptr, name)
					}
				}
			}
			for k, e := range x {
				if strings.HasPrefix(k, "x-") {
					continue // no tool reads an extension's $refs
				}
				childKey := k
				if nameMaps[key] {
					childKey = "" // a name (a property's, a component's), not a keyword
				}
				walk(e, ptr+"/"+pointerToken(k), chain, childKey)
			}
		}
	}
	walk(doc, "", nil, "")

	components, _ := doc["components"].(map[string]any)
	for _, kind := range slices.Sorted(mapKeys(components)) {
		defs, _ := components[kind].(map[string]any)
		for _, name := range slices.Sorted(mapKeys(defs)) {
			if kind == "securitySchemes" {
				if !security[name] {
					add("securitySchemes/%s is not used", name)
				}
				continue
			}
			ptr := "#/components/" + kind + "/" + pointerToken(name)
			own := "/components/" + pointerToken(kind) + "/" + pointerToken(name)
			if !slices.ContainsFunc(uses, func(u use) bool {
				return u.ref == ptr && u.at != own && !strings.HasPrefix(u.at, own+"/")
			}) {
				add("%s is not used", ptr)
			}
		}
	}
	return problems
}

// definedProperties adds the properties s defines, itself or through its
// allOf, anyOf and oneOf members ($refs followed), to defined.
func definedProperties(doc map[string]any, s map[string]any, defined, seen map[string]bool) {
	if r, ok := s["$ref"].(string); ok {
		if seen[r] {
			return
		}
		seen[r] = true
		if p, err := refPointer(r); err == nil {
			if v, ok := oasLookup(doc, p); ok {
				if m, ok := v.(map[string]any); ok {
					definedProperties(doc, m, defined, seen)
				}
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	for name := range props {
		defined[name] = true
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		members, _ := s[k].([]any)
		for _, m := range members {
			if mm, ok := m.(map[string]any); ok {
				definedProperties(doc, mm, defined, seen)
			}
		}
	}
}
