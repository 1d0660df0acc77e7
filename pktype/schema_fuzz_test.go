package pktype_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// FuzzCheckSchema: CheckSchemaShape never panics, answers only its fixed
// messages, and on valid JSON agrees with a recursive reference: it
// passes exactly the documents within all three limits, and a limit it
// names is crossed.
func FuzzCheckSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{"description":"{[{[\"]}"}`, `[[[]]]`, `true`, `"x"`, `1e999`, ``, `{"a":}`, `{} {}`,
		nest(`{"items":`, `}`, pktype.MaxSchemaDepth-1, `{}`),
		nest(`[`, `]`, pktype.MaxSchemaDepth+1, ``),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := pktype.CheckSchemaShape(data)
		if err != nil && !shapeErrors.MatchString(err.Error()) {
			t.Fatalf("error %q is not one of the fixed messages", err)
		}
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("%q is not JSON, but passed", data)
			}
			return
		}
		depth, nodes := refShape(data)
		within := len(data) <= pktype.MaxSchemaBytes && depth <= pktype.MaxSchemaDepth && nodes <= pktype.MaxSchemaNodes
		switch {
		case within != (err == nil):
			t.Fatalf("%q: depth %d, nodes %d, %d bytes: CheckSchemaShape = %v", data, depth, nodes, len(data), err)
		case errors.Is(err, pktype.ErrSchemaTooDeep) && depth <= pktype.MaxSchemaDepth,
			errors.Is(err, pktype.ErrSchemaTooManyNodes) && nodes <= pktype.MaxSchemaNodes,
			errors.Is(err, pktype.ErrSchemaTooLarge) && len(data) <= pktype.MaxSchemaBytes,
			err != nil && !isLimit(err):
			t.Fatalf("%q: depth %d, nodes %d, %d bytes: CheckSchemaShape = %v", data, depth, nodes, len(data), err)
		}
	})
}

// refShape measures valid JSON by recursive descent: how deeply objects
// and arrays nest, and how many objects and booleans it holds.
func refShape(b []byte) (depth, nodes int) {
	i := 0
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	var value func() int
	value = func() int {
		ws()
		switch c := b[i]; c {
		case '{', '[':
			if c == '{' {
				nodes++
			}
			i++
			d := 0
			for {
				ws()
				if b[i] == '}' || b[i] == ']' {
					i++
					return d + 1
				}
				if b[i] == ',' || b[i] == ':' {
					i++
					continue
				}
				d = max(d, value()) // a key is a string: depth 0
			}
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			i++
		case 't', 'f':
			nodes++
			for i < len(b) && b[i] >= 'a' && b[i] <= 'z' {
				i++
			}
		default: // number or null
			for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
				i++
			}
		}
		return 0
	}
	return value(), nodes
}
