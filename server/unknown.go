package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// The catch-alls of /v1: whatever no route there serves.
const (
	v1TreePattern = "/v1/"
	v1RootPattern = "/v1"
)

// unknownRoutes answers, under /v1, a path no route serves with a 404
// and a method its path does not take with a 405 and Allow, as JSON:
// promptkit's REST error on the paths of its own REST routes (prompts,
// jobs, recent, profiles, events), whose clients (the page, the CLI,
// programs written from openapi.json) read that shape, the error of
// another API's dialect on the paths of its routes, and OpenAI's error
// object on every other /v1 path. Those are the OpenAI-compatible
// routes and the routes of OpenAI's API promptkit does not have
// (/v1/completions, /v1/conversations, …), which only an OpenAI SDK asks
// for, and it can report nothing but an OpenAI error object. Outside
// /v1, ServeMux answers as it always has (plain text). It must be called
// after every route is registered.
func (s *Server) unknownRoutes(mux *http.ServeMux) {
	// Each family answers in its routes' dialect (REST's where it has a
	// REST route), so a new API's family needs no change here.
	families := map[string]httpapi.Dialect{}
	for _, p := range s.patterns {
		_, path, _ := strings.Cut(p, " ")
		if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
			if _, seen := families[family(rest)]; !seen || s.dialects[p] == httpapi.REST {
				families[family(rest)] = s.dialects[p]
			}
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := families[family(strings.TrimPrefix(r.URL.Path, "/v1/"))]
		if !ok {
			d = httpapi.OpenAI
		}
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			d.Write(w, methodNotAllowed(r, allow))
			return
		}
		d.Write(w, unknownRoute(r))
	})
	for _, p := range []string{v1TreePattern, v1RootPattern} {
		mux.Handle(p, s.instrument(p, h))
	}
}

// family is the first segment of a path below /v1/ ("prompts" of
// "prompts/{id}/retry").
func family(rest string) string {
	f, _, _ := strings.Cut(rest, "/")
	return f
}

// probeMethods are the methods a 405's Allow may list.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowedMethods are the methods some route serves r's path with (HEAD
// wherever GET is, as ServeMux serves it), none when no route has the
// path.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range probeMethods {
		probe := *r
		probe.Method = m
		if _, p := mux.Handler(&probe); p != "" && p != v1TreePattern && p != v1RootPattern {
			allow = append(allow, m)
		}
	}
	return slices.Compact(allow)
}

// requestLine is the method and path of r, for an error message: the
// caller's own request line, clipped, never a body.
func requestLine(r *http.Request) string {
	line := r.Method + " " + r.URL.EscapedPath()
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return line
}

func unknownRoute(r *http.Request) *httpapi.Problem {
	line := requestLine(r)
	return &httpapi.Problem{Status: http.StatusNotFound, Code: "not_found",
		Message:  "no route serves " + line + " (the routes are in /openapi.json)",
		Sentence: "Invalid URL (" + line + "): promptkit does not serve it (its routes are in /openapi.json)."}
}

func methodNotAllowed(r *http.Request, allow []string) *httpapi.Problem {
	line := requestLine(r)
	methods := strings.Join(allow, ", ")
	return &httpapi.Problem{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Message:  "the method of " + line + " is not allowed; allowed: " + methods,
		Sentence: "The method of " + line + " is not allowed; use " + methods + "."}
}
