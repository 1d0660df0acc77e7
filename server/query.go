package server

import (
	"encoding/json"
	"strings"
	"sync"
)

// queryParams are the query parameters the API document declares for
// each route pattern ("GET /v1/usage"), read once from the embedded
// document: a refusal of a query (httpapi.CheckQuery) names a parameter
// only when its route has one of that name, since any other name is the
// caller's own text. The tests check the document against the routes.
var queryParams = sync.OnceValue(func() map[string]map[string]bool {
	type param struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	out := map[string]map[string]bool{}
	if json.Unmarshal(openAPI, &doc) != nil {
		return out // refusals then name no parameter
	}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				Parameters []param `json:"parameters"`
			}
			if json.Unmarshal(raw, &op) != nil { // "parameters" of the path: not an operation
				continue
			}
			names := map[string]bool{}
			for _, p := range op.Parameters {
				if ref, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
					p = doc.Components.Parameters[ref]
				}
				if p.In == "query" {
					names[p.Name] = true
				}
			}
			out[strings.ToUpper(method)+" "+path] = names
		}
	}
	return out
})

// routeParams tells whether a name is a query parameter of the route of
// pattern.
func routeParams(pattern string) func(string) bool {
	names := queryParams()[pattern]
	return func(name string) bool { return names[name] }
}
