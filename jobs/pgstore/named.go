package pgstore

import (
	"fmt"
	"strconv"
	"strings"
)

// namedSQL is a statement written with $name placeholders, rewritten once
// (at package init) to PostgreSQL's $1, $2… The long CTE statements stay
// readable and their parameters cannot be miscounted.
type namedSQL struct {
	q     string
	names []string
}

// named rewrites $name placeholders in q to positional ones, numbered in
// the order of names. It panics on a placeholder missing from names or a
// name never used: both are programming errors found by any test.
func named(q string, names ...string) namedSQL {
	pos := make(map[string]int, len(names))
	for i, n := range names {
		pos[n] = i + 1
	}
	used := make(map[string]bool, len(names))
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c != '$' || i+1 >= len(q) || !isIdentStart(q[i+1]) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(q) && isIdent(q[j]) {
			j++
		}
		name := q[i+1 : j]
		n, ok := pos[name]
		if !ok {
			panic(fmt.Sprintf("pgstore: placeholder $%s not declared", name))
		}
		used[name] = true
		b.WriteString("$" + strconv.Itoa(n))
		i = j - 1
	}
	for _, n := range names {
		if !used[n] {
			panic(fmt.Sprintf("pgstore: placeholder $%s declared but not used", n))
		}
	}
	return namedSQL{q: b.String(), names: names}
}

// args returns vals, checking their count against the declared names.
func (n namedSQL) args(vals ...any) []any {
	if len(vals) != len(n.names) {
		panic(fmt.Sprintf("pgstore: statement takes %d arguments, got %d", len(n.names), len(vals)))
	}
	return vals
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdent(c byte) bool      { return isIdentStart(c) || c >= '0' && c <= '9' }
