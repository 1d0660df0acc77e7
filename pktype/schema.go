package pktype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Limits on the shape of a JSON Schema document, applied wherever one
// arrives (a request's output schema, a chat's response_format, a prompt
// file's input and output schemas) before it is compiled. Compiling costs
// far more than the document's size suggests: quadratic in nesting depth
// and in the number of subschemas, so that a 55 KB schema nested 5,000
// deep kept a core busy for minutes. Within these limits, and those the
// root package's compile adds (on patterns and $id resources), the worst
// document compiles in tens of milliseconds on two cores
// (BenchmarkCompileSchemaWorst in the root package), and realistic
// schemas fit: OpenAI's structured outputs allow 10 levels of object
// nesting, about 40 JSON levels with nullable anyOf wrappers.
const (
	// MaxSchemaDepth bounds how deeply objects and arrays nest: {} is 1
	// deep, {"items":{}} 2, [[]] 2.
	MaxSchemaDepth = 64
	// MaxSchemaBytes bounds the document's length in bytes, whitespace
	// included.
	MaxSchemaBytes = 128 << 10
	// MaxSchemaNodes bounds the objects and booleans in the document: the
	// values that can be a subschema, and what compiling is quadratic in.
	// Bytes alone do not bound them: {"anyOf":[{},{},…]} holds one every 3
	// bytes, and 40,000 of them took 13 s. The cost is about linear in
	// them, times the depth they sit at: 2,048 allowed 0.12 s per
	// compile at the deepest, 1,024 half that (issue 40). 1,024 is
	// about 1,000 properties, or 340 nullable ones, far beyond a usable
	// response format.
	MaxSchemaNodes = 1024
)

// Errors of CheckSchemaShape, one per limit. Their text names the limit
// and reads after the schema's name ("OutputSchema is nested deeper…",
// "response_format.json_schema.schema: is nested deeper…").
var (
	ErrSchemaTooDeep      = fmt.Errorf("is nested deeper than %d levels of objects and arrays", MaxSchemaDepth)
	ErrSchemaTooLarge     = fmt.Errorf("is larger than %d bytes", MaxSchemaBytes)
	ErrSchemaTooManyNodes = fmt.Errorf("has more than %d objects and booleans (subschemas)", MaxSchemaNodes)
)

// IsObject reports whether raw is a JSON object (not null, not another
// value): what a schema, a response_format or a prompt's inputs must be.
func IsObject(raw []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// CheckSchemaShape checks that raw is one JSON value within MaxSchemaBytes,
// MaxSchemaDepth and MaxSchemaNodes, without building the document and
// without recursion, stopping at the first limit crossed; the error then
// matches ErrSchemaTooLarge, ErrSchemaTooDeep or ErrSchemaTooManyNodes. Whether
// raw is a valid JSON Schema is left to the compiler. Errors never quote
// the document.
func CheckSchemaShape(raw []byte) error {
	if len(raw) > MaxSchemaBytes {
		return ErrSchemaTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number too large for float64 is still JSON
	depth, nodes := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return notJSON(err)
		}
		switch tok {
		case json.Delim('{'), true, false:
			nodes++
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > MaxSchemaDepth {
				return ErrSchemaTooDeep
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if nodes > MaxSchemaNodes {
			return ErrSchemaTooManyNodes
		}
		if depth == 0 {
			break // one whole value
		}
	}
	switch _, err := dec.Token(); {
	case err == nil:
		return errors.New("is not valid JSON: more than one value")
	case err != io.EOF:
		return notJSON(err)
	}
	return nil
}

// notJSON says why raw is not JSON, by offset only.
func notJSON(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("is not valid JSON: syntax error at byte %d", se.Offset)
	case err == io.EOF:
		return errors.New("is not valid JSON: it is empty")
	}
	return errors.New("is not valid JSON: it ends early")
}
