package pktype_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/pktype"
)

// nest wraps inner in n levels of open, closing each with close.
func nest(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// anyOf is a schema whose anyOf holds n copies of item.
func anyOf(n int, item string) string {
	return `{"anyOf":[` + strings.Repeat(item+",", n-1) + item + `]}`
}

// shapeErrors is every message CheckSchemaShape may return: none quotes
// the document.
var shapeErrors = regexp.MustCompile(`^(is nested deeper than 64 levels of objects and arrays|is larger than 131072 bytes|has more than 1024 objects and booleans \(subschemas\)|is not valid JSON: (syntax error at byte \d+|it is empty|it ends early|more than one value))$`)

func TestCheckSchemaShape(t *testing.T) {
	t.Parallel()
	const d = pktype.MaxSchemaDepth
	// pad makes a document exactly n bytes long with one string value.
	pad := func(n int) string {
		const head, tail = `{"description":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	cases := []struct {
		name, doc string
		want      error // nil: passes; errNotJSON: any other error
	}{
		{"small schema", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, nil},
		{"scalar", `true`, nil},
		{"objects at the depth limit", nest(`{"items":`, `}`, d-1, `{}`), nil},
		{"objects one over", nest(`{"items":`, `}`, d, `{}`), pktype.ErrSchemaTooDeep},
		{"arrays at the depth limit", nest(`[`, `]`, d, ``), nil},
		{"arrays one over", nest(`[`, `]`, d+1, ``), pktype.ErrSchemaTooDeep},
		{"objects and arrays mixed, at the limit", nest(`{"anyOf":[`, `]}`, d/2-1, `{"enum":[]}`), nil},
		{"objects and arrays mixed, one over", nest(`{"anyOf":[`, `]}`, d/2-1, `{"enum":[[]]}`), pktype.ErrSchemaTooDeep},
		{"5,000 deep", nest(`{"items":`, `}`, 4999, `{}`), pktype.ErrSchemaTooDeep},
		{"nesting inside a string is not depth", `{"description":"` + strings.Repeat(`{[`, 5000) + `"}`, nil},
		{"escaped quotes inside a string", `{"description":"\"{[\\\"` + strings.Repeat(`[`, 100) + `"}`, nil},
		{"size at the limit", pad(pktype.MaxSchemaBytes), nil},
		{"size one over", pad(pktype.MaxSchemaBytes + 1), pktype.ErrSchemaTooLarge},
		{"objects at the node limit", anyOf(pktype.MaxSchemaNodes-1, `{}`), nil},
		{"objects one over", anyOf(pktype.MaxSchemaNodes, `{}`), pktype.ErrSchemaTooManyNodes},
		{"booleans count as nodes", anyOf(pktype.MaxSchemaNodes, `true`), pktype.ErrSchemaTooManyNodes},
		{"other values do not", anyOf(pktype.MaxSchemaNodes, `1`), nil},
		{"strings do not", `{"enum":[` + strings.Repeat(`"true",`, 3000) + `null]}`, nil},
		{"keys do not", `{"required":[],"properties":{` + strings.Repeat(`"{":1,`, 3000) + `"}":1}}`, nil},
		{"empty", ``, errNotJSON},
		{"unterminated", `{"type":`, errNotJSON},
		{"syntax error", `{"type" "object"}`, errNotJSON},
		{"trailing comma", `{"a":1,}`, errNotJSON},
		{"two values", `{} {}`, errNotJSON},
		{"trailing garbage", `{}x`, errNotJSON},
		{"unbalanced", `{]`, errNotJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := pktype.CheckSchemaShape([]byte(c.doc))
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("CheckSchemaShape = %v, want nil", err)
			case c.want == errNotJSON:
				if err == nil || isLimit(err) || !strings.HasPrefix(err.Error(), "is not valid JSON") {
					t.Fatalf("CheckSchemaShape = %v, want an invalid-JSON error", err)
				}
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("CheckSchemaShape = %v, want %v", err, c.want)
			}
			if err != nil && !shapeErrors.MatchString(err.Error()) {
				t.Fatalf("error %q is not one of the fixed messages", err)
			}
		})
	}
}

var errNotJSON = errors.New("not JSON")

func isLimit(err error) bool {
	return errors.Is(err, pktype.ErrSchemaTooDeep) || errors.Is(err, pktype.ErrSchemaTooLarge) || errors.Is(err, pktype.ErrSchemaTooManyNodes)
}

// TestCheckSchemaShapeStopsEarly: a document far over a limit is refused
// for the limit it crosses first, before the scanner reaches the syntax
// error at its end.
func TestCheckSchemaShapeStopsEarly(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat(`{"items":`, pktype.MaxSchemaDepth+1) + `!`
	if err := pktype.CheckSchemaShape([]byte(doc)); !errors.Is(err, pktype.ErrSchemaTooDeep) {
		t.Fatalf("CheckSchemaShape = %v, want ErrSchemaTooDeep", err)
	}
	doc = `[` + strings.Repeat(`{},`, pktype.MaxSchemaNodes+1) + `!`
	if err := pktype.CheckSchemaShape([]byte(doc)); !errors.Is(err, pktype.ErrSchemaTooManyNodes) {
		t.Fatalf("CheckSchemaShape = %v, want ErrSchemaTooManyNodes", err)
	}
}
