package httpapi

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/promptkit/promptkit/internal/problem"
)

// CheckQuery refuses a query string with a NUL byte, or bytes that are
// not UTF-8, in a parameter's name or value: a 400 that names the
// parameter when named says the route has one of that name, and otherwise
// names none (a name the route does not know is the caller's own text),
// and never quotes a value. No ID, cursor or filter of the API holds
// either, and PostgreSQL cannot even compare text that does while SQLite
// can: refused here, before any handler reads a parameter, it is the same
// 400 on either store.
func CheckQuery(r *http.Request, named func(string) bool) error {
	raw := r.URL.RawQuery
	if !strings.ContainsAny(raw, "%\x00") && utf8.ValidString(raw) {
		return nil
	}
	// What Request.URL.Query keeps of a malformed query; sorted, so the
	// answer is the same every time.
	q, _ := url.ParseQuery(raw)
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if fault := textFault(k); fault != "" {
			return queryProblem("", fault)
		}
		for _, v := range q[k] {
			if fault := textFault(v); fault != "" {
				if named == nil || !named(k) {
					k = ""
				}
				return queryProblem(k, fault)
			}
		}
	}
	return nil
}

// textFault says what no parameter may hold that s does; "" if nothing.
func textFault(s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL byte"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}

func queryProblem(name, fault string) *Problem {
	msg := "a query parameter " + fault + ", which no parameter may"
	if name != "" {
		msg = "query parameter " + name + " " + fault + ", which no parameter may"
	}
	return &Problem{Status: http.StatusBadRequest, Kind: problem.BadValue, Code: "invalid_request", Param: name,
		Message: msg, Sentence: sentence(msg)}
}

// RefuseNUL answers CheckQuery's refusal (of a NUL, or of bytes that are
// not UTF-8) in d's shape, or runs next;
// named tells the route's parameters (nil: none named).
func (d Dialect) RefuseNUL(named func(string) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckQuery(r, named); err != nil {
			d.Write(w, Classify(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}
