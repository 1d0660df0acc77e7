package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/events"
	"github.com/promptkit/promptkit/server/internal/httpapi"
	"github.com/promptkit/promptkit/server/internal/page"
	"github.com/promptkit/promptkit/server/internal/rest"
)

// The OpenAPI document as a validator. checkResponse (used by every API
// test) and checkEventData compile the schemas they need once and share
// them across parallel tests.

// oasURL names openapi.json as a schema resource; $refs inside it
// ("#/components/schemas/Job") resolve within the document.
const oasURL = "openapi.json"

var oas struct {
	once sync.Once
	doc  map[string]any // decoded with json.Number, as the compiler wants
	err  error

	mu       sync.Mutex // guards c and schemas: a Compiler is not safe for concurrent use
	c        *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	compErrs map[string]error
}

// oasDoc returns the decoded document, failing t when it does not parse.
func oasDoc(t testing.TB) map[string]any {
	t.Helper()
	oas.once.Do(func() {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPI))
		if err != nil {
			oas.err = fmt.Errorf("openapi.json: %w", err)
			return
		}
		doc, ok := v.(map[string]any)
		if !ok {
			oas.err = errors.New("openapi.json is not a JSON object")
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat() // date-time must be RFC 3339
		if err := c.AddResource(oasURL, doc); err != nil {
			oas.err = err
			return
		}
		oas.doc, oas.c = doc, c
		oas.schemas, oas.compErrs = map[string]*jsonschema.Schema{}, map[string]error{}
	})
	if oas.err != nil {
		t.Fatal(oas.err)
	}
	return oas.doc
}

// oasSchema compiles the schema at a JSON pointer into the document
// ("/components/schemas/Job"), once.
func oasSchema(t testing.TB, ptr string) (*jsonschema.Schema, error) {
	t.Helper()
	oasDoc(t)
	oas.mu.Lock()
	defer oas.mu.Unlock()
	if s, ok := oas.schemas[ptr]; ok {
		return s, nil
	}
	if err, ok := oas.compErrs[ptr]; ok {
		return nil, err
	}
	s, err := oas.c.Compile(oasURL + "#" + urlPointer(ptr))
	if err != nil {
		err = fmt.Errorf("openapi.json: compiling the schema at %s: %w", ptr, err)
		oas.compErrs[ptr] = err
		return nil, err
	}
	oas.schemas[ptr] = s
	return s, nil
}

// oasValidate checks a JSON body against the schema at ptr.
func oasValidate(t testing.TB, ptr string, body []byte) error {
	t.Helper()
	s, err := oasSchema(t, ptr)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("the body does not match %s: %#v", ptr, err)
	}
	return nil
}

// pointerToken escapes one JSON pointer token (RFC 6901).
func pointerToken(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// urlPointer percent-encodes a JSON pointer for a URL fragment ("{id}").
func urlPointer(ptr string) string {
	toks := strings.Split(ptr, "/")
	for i, tok := range toks {
		toks[i] = url.PathEscape(tok)
	}
	return strings.Join(toks, "/")
}

// oasLookup returns the value at a JSON pointer into the document.
func oasLookup(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	v := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// refPointer turns a local $ref ("#/components/responses/NotFound") into
// a JSON pointer.
func refPointer(ref string) (string, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return "", fmt.Errorf("$ref %q is not local to the document", ref)
	}
	return url.PathUnescape(frag)
}

// oasDeref follows $refs from the object at ptr (a response, parameter
// or header) to its definition, returning it and its pointer.
func oasDeref(doc map[string]any, v any, ptr string) (map[string]any, string, error) {
	for range 10 {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, ptr, fmt.Errorf("%s is not an object", ptr)
		}
		ref, ok := obj["$ref"].(string)
		if !ok {
			return obj, ptr, nil
		}
		p, err := refPointer(ref)
		if err != nil {
			return nil, ptr, err
		}
		if v, ok = oasLookup(doc, p); !ok {
			return nil, ptr, fmt.Errorf("%s: $ref %q does not resolve", ptr, ref)
		}
		ptr = p
	}
	return nil, ptr, fmt.Errorf("%s: $ref cycle", ptr)
}

// oasMethods are the operation keys of a path item.
var oasMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// checkResponse fails t unless the document has an operation for route (a
// ServeMux pattern like "GET /v1/prompts/{id}"), that operation documents
// status (or "default"), every header the response marks required is
// present, the Content-Type is one of the documented media types, and
// the body validates against that media type's schema: application/json
// bodies as a whole; text/event-stream bodies event by event (each
// complete event's name and data, and its id against the data's seq).
// A nil body means the caller did not read it: only the status and
// headers are checked. A response documenting no content must have an
// empty body.
func checkResponse(t testing.TB, route string, status int, header http.Header, body []byte) {
	t.Helper()
	doc := oasDoc(t)
	method, path, ok := strings.Cut(route, " ")
	if !ok {
		t.Errorf("checkResponse: route %q is not \"METHOD /path\"", route)
		return
	}
	opPtr := "/paths/" + pointerToken(path) + "/" + strings.ToLower(method)
	op, ok := oasLookup(doc, opPtr)
	if !ok {
		t.Errorf("openapi.json documents no operation %s", route)
		return
	}
	responses, _ := op.(map[string]any)["responses"].(map[string]any)
	key := strconv.Itoa(status)
	if _, ok := responses[key]; !ok {
		key = strconv.Itoa(status/100) + "XX"
	}
	if _, ok := responses[key]; !ok {
		key = "default"
	}
	if _, ok := responses[key]; !ok {
		t.Errorf("openapi.json: %s does not document status %d (body %.300s)", route, status, body)
		return
	}
	resp, respPtr, err := oasDeref(doc, responses[key], opPtr+"/responses/"+pointerToken(key))
	if err != nil {
		t.Errorf("openapi.json: %v", err)
		return
	}
	headers, _ := resp["headers"].(map[string]any)
	for name, h := range headers {
		hd, _, err := oasDeref(doc, h, respPtr+"/headers/"+pointerToken(name))
		if err != nil {
			t.Errorf("openapi.json: %v", err)
			continue
		}
		if req, _ := hd["required"].(bool); req && header.Get(name) == "" {
			t.Errorf("%s %d: the documented header %s is missing", route, status, name)
		}
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 {
			t.Errorf("%s %d: openapi.json documents no body, got %.300s", route, status, body)
		}
		return
	}
	ct := header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Errorf("%s %d: Content-Type %q: %v", route, status, ct, err)
		return
	}
	var media map[string]any
	var mediaKey string
	for k, v := range content {
		if strings.EqualFold(k, mt) {
			media, _ = v.(map[string]any)
			mediaKey = k
		}
	}
	if media == nil {
		t.Errorf("%s %d: Content-Type %q is not documented (documented: %v)", route, status, ct, slices.Sorted(mapKeys(content)))
		return
	}
	if body == nil {
		return
	}
	mediaPtr := respPtr + "/content/" + pointerToken(mediaKey)
	switch strings.ToLower(mt) {
	case "application/json":
		if _, ok := media["schema"]; !ok {
			return
		}
		if err := oasValidate(t, mediaPtr+"/schema", body); err != nil {
			t.Errorf("%s %d: %v\nbody: %.1000s", route, status, err, body)
		}
	case "text/event-stream":
		if _, ok := media["x-event-data"]; !ok {
			return
		}
		name, _ := media["x-event-name"].(string)
		for _, err := range checkEvents(t, mediaPtr+"/x-event-data", name, body) {
			t.Errorf("%s %d: %v", route, status, err)
		}
	}
}

// checkEvents checks each complete event of a Server-Sent Events body.
func checkEvents(t testing.TB, dataPtr, name string, body []byte) []error {
	t.Helper()
	var errs []error
	text := strings.ReplaceAll(string(body), "\r\n", "\n")
	blocks := strings.Split(text, "\n\n")
	blocks = blocks[:len(blocks)-1] // the last is incomplete (or empty)
	for _, block := range blocks {
		var id, event string
		var data []string
		for line := range strings.SplitSeq(block, "\n") {
			if line == "" || strings.HasPrefix(line, ":") {
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				event = value
			case "data":
				data = append(data, value)
			default:
				errs = append(errs, fmt.Errorf("event field %q is not documented", field))
			}
		}
		if id == "" && event == "" && data == nil {
			continue // comments only: the opening line or a keep-alive
		}
		if event != name {
			errs = append(errs, fmt.Errorf("event %q, documented %q", event, name))
		}
		d := []byte(strings.Join(data, "\n"))
		if err := oasValidate(t, dataPtr, d); err != nil {
			errs = append(errs, fmt.Errorf("event data: %v\ndata: %.1000s", err, d))
			continue
		}
		var seq struct {
			Seq *json.Number `json:"seq"`
		}
		if json.Unmarshal(d, &seq) == nil && seq.Seq != nil && id != seq.Seq.String() {
			errs = append(errs, fmt.Errorf("event id %q is not its data's seq %s", id, seq.Seq))
		}
	}
	return errs
}

// checkEventData fails t unless data (one data: line of /v1/events)
// validates against the documented event data.
func checkEventData(t testing.TB, data []byte) {
	t.Helper()
	if err := oasValidate(t, oasEventDataPtr, data); err != nil {
		t.Errorf("GET /v1/events: event data: %v\ndata: %.1000s", err, data)
	}
}

const oasEventDataPtr = "/paths/~1v1~1events/get/responses/200/content/text~1event-stream/x-event-data"

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// oasFakeStore is a store that New accepts; the few methods these tests
// reach answer from its fields, any other panics (nil embedded Store).
type oasFakeStore struct {
	jobs.Store
	checkErr error
}

func (oasFakeStore) HasTokens(context.Context) (bool, error) { return false, nil }

func (f oasFakeStore) Check(context.Context) error { return f.checkErr }

func (oasFakeStore) Enqueue(context.Context, jobs.EnqueueParams) (jobs.Enqueued, error) {
	return jobs.Enqueued{PromptID: "0190f4d5-5b1c-7a3e-9c1d-2f4e6a8b0c11", JobID: "0190f4d5-5b1c-7a3e-9c1d-2f4e6a8b0c12", State: jobs.Queued}, nil
}

type oasFakeMetrics struct{}

func (oasFakeMetrics) ObserveHTTP(string, int, time.Duration) {}
func (oasFakeMetrics) SSEClients(int)                         {}
func (oasFakeMetrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte("# HELP promptkit_up 1\npromptkit_up 1\n"))
	})
}

func TestOpenAPIOperationsAreTheRoutes(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Store: oasFakeStore{}, Metrics: oasFakeMetrics{}})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	paths, _ := oasDoc(t)["paths"].(map[string]any)
	for path, item := range paths {
		for method := range item.(map[string]any) {
			if slices.Contains(oasMethods, method) {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(documented)
	// The browser page's routes serve HTML and static files, not API
	// operations: page_test.go covers them.
	served := slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(s.patterns),
		func(p string) bool { return slices.Contains(pagePatterns, p) })))
	for _, p := range served {
		if !slices.Contains(documented, p) {
			t.Errorf("route %s is not in openapi.json", p)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("openapi.json documents %s, which the server does not serve", d)
		}
	}
}

func TestOpenAPIEnumsAreTheGoOnes(t *testing.T) {
	t.Parallel()
	doc := oasDoc(t)
	enum := func(name string) []string {
		v, _ := oasLookup(doc, "/components/schemas/"+name+"/enum")
		var out []string
		for _, e := range v.([]any) {
			out = append(out, e.(string))
		}
		return out
	}
	var states, kinds []string
	for _, s := range jobs.States() {
		states = append(states, string(s))
	}
	for _, k := range jobs.ErrorKinds() {
		kinds = append(kinds, string(k))
	}
	if got := enum("State"); !slices.Equal(got, states) {
		t.Errorf("State enum %v, jobs.States() %v", got, states)
	}
	if got := enum("ErrorKind"); !slices.Equal(got, kinds) {
		t.Errorf("ErrorKind enum %v, jobs.ErrorKinds() %v", got, kinds)
	}
}

// TestOpenAPIDocument checks the document's structure (there is no
// OpenAPI meta-schema offline): the version, that every $ref resolves,
// unique operationIds, responses with descriptions, declared path
// parameters, and that every schema compiles under JSON Schema 2020-12
// (the compiler checks each against the draft's meta-schema).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := oasDoc(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] == nil || info["version"] == nil {
		t.Error("info needs title and version")
	}

	// Every $ref resolves within the document.
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "$ref" {
					p, err := refPointer(e.(string))
					if err != nil {
						t.Errorf("%s: %v", ptr, err)
					} else if _, ok := oasLookup(doc, p); !ok {
						t.Errorf("%s: $ref %q does not resolve", ptr, e)
					}
					continue
				}
				walk(e, ptr+"/"+pointerToken(k))
			}
		case []any:
			for i, e := range x {
				walk(e, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "")

	schemaPtrs := []string{}
	media := func(content any, ptr string) {
		m, _ := content.(map[string]any)
		for k, v := range m {
			if _, ok := v.(map[string]any)["schema"]; ok {
				schemaPtrs = append(schemaPtrs, ptr+"/"+pointerToken(k)+"/schema")
			}
		}
	}
	ids := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	for path, it := range paths {
		item := it.(map[string]any)
		itemPtr := "/paths/" + pointerToken(path)
		for _, method := range oasMethods {
			o, ok := item[method]
			if !ok {
				continue
			}
			op := o.(map[string]any)
			route := strings.ToUpper(method) + " " + path
			opPtr := itemPtr + "/" + method
			id, _ := op["operationId"].(string)
			switch {
			case id == "":
				t.Errorf("%s has no operationId", route)
			case ids[id] != "":
				t.Errorf("operationId %s is used by %s and %s", id, ids[id], route)
			default:
				ids[id] = route
			}
			if op["summary"] == nil && op["description"] == nil {
				t.Errorf("%s has neither summary nor description", route)
			}

			// Path parameters: declared (on the path or the operation)
			// exactly for the template's {names}, and required.
			declared := map[string]bool{}
			for _, list := range []struct {
				v   any
				ptr string
			}{{item["parameters"], itemPtr + "/parameters"}, {op["parameters"], opPtr + "/parameters"}} {
				ps, _ := list.v.([]any)
				for i, p := range ps {
					prm, pptr, err := oasDeref(doc, p, list.ptr+"/"+strconv.Itoa(i))
					if err != nil {
						t.Error(err)
						continue
					}
					if prm["schema"] != nil {
						schemaPtrs = append(schemaPtrs, pptr+"/schema")
					}
					if prm["in"] != "path" {
						continue
					}
					name, _ := prm["name"].(string)
					declared[name] = true
					if req, _ := prm["required"].(bool); !req {
						t.Errorf("%s: path parameter %s must be required", route, name)
					}
					if !strings.Contains(path, "{"+name+"}") {
						t.Errorf("%s: path parameter %s is not in the path", route, name)
					}
				}
			}
			for rest := path; ; {
				_, after, ok := strings.Cut(rest, "{")
				if !ok {
					break
				}
				name, tail, _ := strings.Cut(after, "}")
				if !declared[name] {
					t.Errorf("%s: path parameter %s is not declared", route, name)
				}
				rest = tail
			}

			if rb, ok := op["requestBody"]; ok {
				b, bptr, err := oasDeref(doc, rb, opPtr+"/requestBody")
				if err != nil {
					t.Error(err)
				} else {
					media(b["content"], bptr+"/content")
				}
			}
			responses, _ := op["responses"].(map[string]any)
			if len(responses) == 0 {
				t.Errorf("%s documents no responses", route)
			}
			for code, r := range responses {
				if _, err := strconv.Atoi(code); err != nil && code != "default" && !strings.HasSuffix(code, "XX") {
					t.Errorf("%s: response key %q is not a status", route, code)
				}
				resp, rptr, err := oasDeref(doc, r, opPtr+"/responses/"+pointerToken(code))
				if err != nil {
					t.Error(err)
					continue
				}
				if d, _ := resp["description"].(string); d == "" {
					t.Errorf("%s %s: a response needs a description", route, code)
				}
				media(resp["content"], rptr+"/content")
			}
		}
	}

	schemas, _ := oasLookup(doc, "/components/schemas")
	for name := range schemas.(map[string]any) {
		schemaPtrs = append(schemaPtrs, "/components/schemas/"+pointerToken(name))
	}
	schemaPtrs = append(schemaPtrs, oasEventDataPtr)
	for _, p := range schemaPtrs {
		if _, err := oasSchema(t, p); err != nil {
			t.Error(err)
		}
	}
}

// isProblemType reports whether a composite literal's type is
// httpapi.Problem (or Problem, inside httpapi).
func isProblemType(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name == "Problem"
	case *ast.SelectorExpr:
		return t.Sel.Name == "Problem"
	}
	return false
}

// oasStatuses maps the http.Status constants the server may use to their
// codes, for TestOpenAPIErrorCodes.
var oasStatuses = map[string]int{
	"StatusBadRequest": 400, "StatusUnauthorized": 401, "StatusForbidden": 403, "StatusNotFound": 404,
	"StatusMethodNotAllowed": 405, "StatusNotAcceptable": 406, "StatusRequestTimeout": 408,
	"StatusConflict": 409, "StatusGone": 410, "StatusRequestEntityTooLarge": 413,
	"StatusUnsupportedMediaType": 415, "StatusUnprocessableEntity": 422, "StatusTooManyRequests": 429,
	"StatusInternalServerError": 500, "StatusNotImplemented": 501, "StatusBadGateway": 502,
	"StatusServiceUnavailable": 503, "StatusGatewayTimeout": 504,
}

// TestOpenAPIErrorCodes reads every Problem{Status: http.StatusX, Code:
// "code"} of the source of promptkit's own API — the server and the
// packages of its REST dialect, not the OpenAI-compatible front door,
// whose errors are OpenAI's (openai_test.go checks those) — and checks
// that each operation documenting that status accepts an error with that
// code, and that at least one operation documents it.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	var files []string
	for _, dir := range []string{".", "internal/httpapi", "internal/auth", "internal/rest", "internal/events", "internal/page"} {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, names...)
	}
	type use struct {
		status int
		code   string
		at     string
	}
	var uses []use
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || !isProblemType(lit.Type) {
				return true
			}
			at := fset.Position(lit.Pos()).String()
			var status ast.Expr
			var code *ast.BasicLit
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch key, _ := kv.Key.(*ast.Ident); {
				case key == nil:
				case key.Name == "Status":
					status = kv.Value
				case key.Name == "Code":
					code, _ = kv.Value.(*ast.BasicLit)
				}
			}
			if code == nil {
				return true // a code passed in: OpenAIInvalid's, the front door's
			}
			sel, ok := status.(*ast.SelectorExpr)
			if !ok || code.Kind != token.STRING {
				t.Errorf("%s: a Problem's Status and Code must be an http.Status constant and a string literal for this test", at)
				return true
			}
			st, known := oasStatuses[sel.Sel.Name]
			if !known {
				t.Errorf("%s: add http.%s to oasStatuses", at, sel.Sel.Name)
				return true
			}
			c, _ := strconv.Unquote(code.Value)
			uses = append(uses, use{st, c, at})
			return true
		})
	}
	if len(uses) < 10 {
		t.Fatalf("found only %d Problem literals; is the parser looking in the right place?", len(uses))
	}

	doc := oasDoc(t)
	paths, _ := doc["paths"].(map[string]any)
	for _, u := range uses {
		if u.status == http.StatusMethodNotAllowed {
			// A 405 answers a method no operation serves (unknown.go): the
			// document describes it once, in info.description, and
			// TestUnknownRoutes checks it against the Error schema.
			continue
		}
		body, _ := json.Marshal(apiError{errorBody{Code: u.code, Message: "m"}})
		documented := false
		for path, it := range paths {
			for method, o := range it.(map[string]any) {
				if !slices.Contains(oasMethods, method) {
					continue
				}
				// The OpenAI-compatible routes answer OpenAI's error shape
				// (openai_test.go checks theirs).
				if tags, _ := o.(map[string]any)["tags"].([]any); slices.Contains(tags, any("openai")) {
					continue
				}
				key := strconv.Itoa(u.status)
				r, ok := o.(map[string]any)["responses"].(map[string]any)[key]
				if !ok {
					continue
				}
				documented = true
				opPtr := "/paths/" + pointerToken(path) + "/" + method
				resp, rptr, err := oasDeref(doc, r, opPtr+"/responses/"+key)
				if err != nil {
					t.Error(err)
					continue
				}
				if _, ok := resp["content"].(map[string]any)["application/json"]; !ok {
					continue // e.g. a health status, not an error
				}
				if u.status == http.StatusServiceUnavailable {
					continue
				}
				if err := oasValidate(t, rptr+"/content/application~1json/schema", body); err != nil {
					t.Errorf("%s: %d %q: %s %s: %v", u.at, u.status, u.code, strings.ToUpper(method), path, err)
				}
			}
		}
		if !documented {
			t.Errorf("%s: no operation documents status %d (%s)", u.at, u.status, u.code)
		}
	}
}

// Sample values of every body, as the handlers build them.
var (
	oasT0      = time.Date(2026, 12, 3, 12, 0, 0, 123456000, time.UTC)
	oasPromptA = "0190f4d5-5b1c-7a3e-9c1d-2f4e6a8b0c11"
	oasJob1    = "0190f4d5-5b1c-7a3e-9c1d-2f4e6a8b0c12"
	oasJob2    = "0190f4d5-6000-7a3e-9c1d-2f4e6a8b0c13"
)

func oasSampleJobs() (old, cur jobs.Job) {
	old = jobs.Job{
		ID: oasJob1, PromptID: oasPromptA, State: jobs.Superseded, Priority: 50, Attempt: 3, MaxAttempts: 3,
		ExecutionOptions: jobs.ExecutionOptions{Model: "gpt-x", Depth: new(2)}, WorkerClaim: "host-1/42/1",
		ClaimedAt: oasT0.Add(time.Second), StartedAt: oasT0.Add(time.Second), HeartbeatAt: oasT0.Add(2 * time.Second),
		FinishedAt: oasT0.Add(3 * time.Second), ErrorKind: jobs.KindProvider5xx, ErrorMessage: "HTTP 503 from the provider",
		OrgID: "default", CreatedBy: "local", CreatedAt: oasT0, UpdatedAt: oasT0.Add(4 * time.Second), AvailableAt: oasT0,
	}
	cur = jobs.Job{
		ID: oasJob2, PromptID: oasPromptA, State: jobs.Succeeded, Priority: 10, Attempt: 1, MaxAttempts: 3,
		WorkerClaim: "host-2/7/1",
		ClaimedAt:   oasT0.Add(5 * time.Second), StartedAt: oasT0.Add(5 * time.Second), HeartbeatAt: oasT0.Add(5 * time.Second),
		FinishedAt: oasT0.Add(6 * time.Second), ResponseID: jobs.ResponseID(oasPromptA, oasJob2), Supersedes: oasJob1,
		DependsOn: "0190f4d5-0000-7a3e-9c1d-2f4e6a8b0c00", OrgID: "default", CreatedBy: "local", CreatedAt: oasT0.Add(4 * time.Second), UpdatedAt: oasT0.Add(6 * time.Second),
		AvailableAt: oasT0.Add(4 * time.Second),
	}
	return old, cur
}

func oasSampleAnswer() *answerView {
	u := pktype.Usage{TokenUsage: pktype.TokenUsage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}}
	u.Known.PromptTokens, u.Known.CompletionTokens, u.Known.TotalTokens = true, true, true
	r := jobs.Response{
		ID: jobs.ResponseID(oasPromptA, oasJob2), PromptID: oasPromptA, JobID: oasJob2, Answer: jobs.Answer{Output: `{"answer": 42}`,
			Parsed: json.RawMessage(`{"answer":42}`), Model: "gpt-x", Usage: u}, CreatedAt: oasT0.Add(6 * time.Second),
	}
	return &answerView{Response: r, HTML: page.Render(r)}
}

func TestOpenAPISchemasFitTheGoTypes(t *testing.T) {
	t.Parallel()
	oldJob, curJob := oasSampleJobs()
	// The API's jobs carry their error in words (old failed with a 5xx).
	old, cur := rest.NewJobOut(oldJob), rest.NewJobOut(curJob)
	queued := rest.NewJobOut(jobs.Job{ID: oasJob1, PromptID: oasPromptA, State: jobs.Queued, Priority: 50, Attempt: 1, MaxAttempts: 3,
		OrgID: "acme", CreatedBy: "ann", CreatedAt: oasT0, UpdatedAt: oasT0, AvailableAt: oasT0.Add(time.Hour)})
	answer := oasSampleAnswer()
	noUsage := *answer
	noUsage.Parsed, noUsage.Model, noUsage.Usage = nil, "", pktype.Usage{}
	textPrompt := jobs.Prompt{ID: oasPromptA, OrgID: "default", CreatedBy: "local", Text: "Say hi",
		Profile: "fast", IdempotencyKey: "k-1", CreatedAt: oasT0}
	namedPrompt := jobs.Prompt{ID: oasPromptA, OrgID: "acme", CreatedBy: "ann", ParentID: "0190f4d5-0000-7a3e-9c1d-2f4e6a8b0c01",
		CorrelationID: "batch-7", PromptRef: "summarize", Inputs: json.RawMessage(`{"text":"..."}`), CreatedAt: oasT0}
	transition := jobs.Event{Seq: 7, JobID: oasJob1, PromptID: oasPromptA, OrgID: "default", Type: jobs.EventTransition,
		From: jobs.Running, To: jobs.Queued, At: oasT0,
		Data: jobs.TransitionData{Worker: "host-1/42/1", ErrorKind: jobs.KindTimeout, ErrorMessage: "deadline"}.JSON()}

	for _, c := range []struct {
		name, schema string
		v            any
	}{
		{"submitted", "Submitted", submitted{PromptID: oasPromptA, JobID: oasJob1, State: jobs.Queued}},
		{"prompt view, succeeded", "PromptView", promptView{Prompt: textPrompt, Job: cur, Answer: answer, Jobs: []rest.JobOut{old, cur}}},
		{"prompt view, queued", "PromptView", promptView{Prompt: namedPrompt, Job: queued, Jobs: []rest.JobOut{queued}}},
		{"prompt view, unknown usage", "PromptView", promptView{Prompt: textPrompt, Job: cur, Answer: &noUsage, Jobs: []rest.JobOut{cur}}},
		{"prompt list", "PromptList", promptList{Prompts: []promptState{{PromptID: oasPromptA, Job: cur}, {PromptID: oasPromptA, Job: queued}}, NextCursor: jobs.CursorAfter(queued.Job).String()}},
		{"prompt list, last page", "PromptList", promptList{Prompts: []promptState{}}},
		{"recent", "Recent", recent{Prompts: []promptState{{PromptID: oasPromptA, Job: cur, Answer: answer}, {PromptID: oasPromptA, Job: queued}}, AsOf: oasT0}},
		{"recent, empty", "Recent", recent{Prompts: []promptState{}, AsOf: oasT0}},
		{"job view", "JobView", jobView{Job: old, Events: []jobs.Event{
			{Seq: 1, JobID: oasJob1, PromptID: oasPromptA, OrgID: "default", Type: jobs.EventTransition, To: jobs.Queued, At: oasT0},
			transition,
			{Seq: 8, JobID: oasJob1, PromptID: oasPromptA, OrgID: "default", CreatedBy: "local", Attempt: 2, Type: jobs.EventAttempt,
				Data: json.RawMessage(`{"status":"error","ms":12}`), At: oasT0},
		}}},
		{"job view, no events", "JobView", jobView{Job: queued, Events: httpapi.NonNil([]jobs.Event(nil))}},
		{"cancel", "CancelResult", struct {
			Job rest.JobOut `json:"job"`
		}{queued}},
		{"state changed", "StateChanged", events.StateChangedOf(jobs.Event{Seq: 7, JobID: oasJob1, PromptID: oasPromptA, Attempt: 2,
			Type: jobs.EventTransition, From: jobs.Running, To: jobs.Queued, At: oasT0, Data: transition.Data})},
		{"state changed, new job", "StateChanged", events.StateChangedOf(jobs.Event{Seq: 1, JobID: oasJob1, PromptID: oasPromptA, Attempt: 1,
			Type: jobs.EventTransition, To: jobs.Queued, At: oasT0})},
		{"error", "Error", apiError{errorBody{Code: "not_found", Message: "prompt: not found"}}},
		{"submit request", "SubmitRequest", jobs.Submission{Prompt: "summarize", Inputs: json.RawMessage(`{"a":1}`), Priority: new(0),
			Profile: "fast", ParentID: "p", ScheduledFor: &oasT0, DependsOn: "j", MaxAttempts: new(5),
			ExecutionOptions: json.RawMessage(`{"model":"m","depth":0,"prefer_provider":"b"}`)}},
		{"retry request", "RetryRequest", retryRequest{Priority: new(100)}},
		{"stream ticket", "StreamTicket", ticketAnswer{Ticket: auth.TicketPrefix + strings.Repeat("A", 43), ExpiresAt: oasT0}},
		{"profiles", "ProfileList", profileList{Profiles: []string{"default", "fast"}, Default: "default",
			Labels: map[string]string{"default": "Default", "fast": "Fast (cheaper)"}}},
		{"profiles, no engine", "ProfileList", profileList{Profiles: []string{}, Labels: map[string]string{}}},
		{"usage", "UsagePage", usagePage{Object: "page", Data: []rest.UsageBucket{{Object: "bucket", StartTime: 0, EndTime: 86400,
			Results: []rest.UsageResult{{Object: "organization.usage.completions.result", InputTokens: 100, OutputTokens: 10,
				InputCachedTokens: 20, OutputReasoningTokens: 4, NumModelRequests: 2, Model: new("m"), CostUSD: 0.5,
				UnknownUsageRequests: 1, UnknownCachedRequests: 1, UnknownReasoningRequests: 1, UnknownCostRequests: 1}}}}}},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := oasValidate(t, "/components/schemas/"+c.schema, b); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, b)
		}
	}

	// The schemas are closed: drift in either direction fails.
	for _, c := range []struct{ schema, body string }{
		{"Submitted", `{"prompt_id":"p","job_id":"j","state":"queued","extra":1}`},
		{"Submitted", `{"prompt_id":"p","job_id":"j","state":"paused"}`},
		{"Usage", `{"prompt_tokens":1,"completion_tokens":null,"total_tokens":1,"cached_tokens":0}`},
		{"Job", `{"id":"j"}`},
		{"StateChanged", `{"seq":1,"prompt_id":"p","job_id":"j","state":"queued","attempt":1,"at":"yesterday"}`},
		{"Error", `{"error":{"code":"teapot","message":"m"}}`},
	} {
		if oasValidate(t, "/components/schemas/"+c.schema, []byte(c.body)) == nil {
			t.Errorf("%s accepts %s", c.schema, c.body)
		}
	}
}

// TestOpenAPIServedAnswers runs the handlers that need no database
// through checkResponse.
func TestOpenAPIServedAnswers(t *testing.T) {
	t.Parallel()
	newServer := func(cfg Config) *Server {
		t.Helper()
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	secure := newServer(Config{Store: oasFakeStore{}, Metrics: oasFakeMetrics{}})
	openMetrics := newServer(Config{Store: oasFakeStore{}, Metrics: oasFakeMetrics{}, MetricsAccess: MetricsOpen})
	local := newServer(Config{Store: oasFakeStore{}, InsecureNoAuth: true, SubmitRate: 1, SubmitBurst: 1, MaxBodyBytes: 64})
	down := newServer(Config{Store: oasFakeStore{checkErr: errors.New("database down")}, Logger: slog.New(slog.DiscardHandler)})

	for _, c := range []struct {
		s            *Server
		method, path string
		body         string
		header       []string
		want         int
	}{
		{secure, "GET", "/healthz", "", nil, 200},
		{secure, "GET", "/readyz", "", nil, 200},
		{down, "GET", "/readyz", "", nil, 503},
		{secure, "GET", "/openapi.json", "", nil, 200},
		{secure, "GET", "/metrics", "", nil, 401},
		{openMetrics, "GET", "/metrics", "", nil, 200},
		{secure, "GET", "/v1/prompts", "", nil, 401},
		{secure, "GET", "/v1/events", "", nil, 401},
		{local, "POST", "/v1/prompts", `{"text":`, nil, 400},
		{local, "POST", "/v1/prompts", `{"text":"hi","unknown":1}`, nil, 400},
		{local, "POST", "/v1/prompts?wait=soon", `{"text":"hi"}`, nil, 400},
		{local, "POST", "/v1/prompts", `{"text":"` + strings.Repeat("x", 100) + `"}`, nil, 413},
		{local, "POST", "/v1/prompts", `{"text":"hi"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400},
		{local, "POST", "/v1/prompts", `{"text":"hi"}`, nil, 202},
		{local, "POST", "/v1/prompts", `{"text":"hi"}`, nil, 429},
		{local, "GET", "/v1/prompts?limit=0", "", nil, 400},
		{local, "GET", "/v1/recent?since=yesterday", "", nil, 400},
		{local, "GET", "/v1/events", "", []string{"Last-Event-ID", "x"}, 400},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Host = "localhost" // not httptest's example.com, which local mode refuses
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		rec := httptest.NewRecorder()
		c.s.handler.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.path, rec.Code, c.want, rec.Body)
			continue
		}
		// No case has a path parameter: the path is the route.
		checkResponse(t, c.method+" "+req.URL.Path, rec.Code, rec.Header(), rec.Body.Bytes())
	}
}

// TestCheckResponseFails makes sure checkResponse catches what it should.
func TestCheckResponseFails(t *testing.T) {
	t.Parallel()
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	sseCT := http.Header{"Content-Type": {"text/event-stream"}}
	good := `{"prompt_id":"p","job_id":"j","state":"queued"}`
	// A submission's answer names its prompt and job in headers too.
	withIDs := func(h http.Header) http.Header {
		h = h.Clone()
		h.Set(headerPromptID, "p")
		h.Set(headerJobID, "j")
		return h
	}
	event := func(id, name, data string) string {
		return fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", id, name, data)
	}
	sc := `{"seq":3,"prompt_id":"p","job_id":"j","state":"running","from":"queued","attempt":1,"at":"2026-12-03T12:00:00Z"}`
	for _, c := range []struct {
		name   string
		route  string
		status int
		header http.Header
		body   string
		fails  bool
	}{
		{"valid", "POST /v1/prompts", 202, withIDs(jsonCT), good, false},
		{"charset parameter", "POST /v1/prompts", 202, withIDs(http.Header{"Content-Type": {"application/json; charset=utf-8"}}), good, false},
		{"no id headers", "POST /v1/prompts", 202, jsonCT, good, true},
		{"unknown route", "POST /v1/nothing", 202, jsonCT, good, true},
		{"bad route", "/v1/prompts", 202, jsonCT, good, true},
		{"undocumented status", "POST /v1/prompts", 201, jsonCT, good, true},
		{"wrong content type", "POST /v1/prompts", 202, http.Header{"Content-Type": {"text/plain"}}, good, true},
		{"no content type", "POST /v1/prompts", 202, http.Header{}, good, true},
		{"missing field", "POST /v1/prompts", 202, jsonCT, `{"prompt_id":"p","job_id":"j"}`, true},
		{"extra field", "POST /v1/prompts", 202, jsonCT, `{"prompt_id":"p","job_id":"j","state":"queued","x":1}`, true},
		{"not JSON", "POST /v1/prompts", 202, jsonCT, `{`, true},
		{"empty", "POST /v1/prompts", 202, jsonCT, ``, true},
		{"wrong error code", "GET /v1/prompts/{id}", 404, jsonCT, `{"error":{"code":"conflict","message":"m"}}`, true},
		{"429 without Retry-After", "POST /v1/prompts", 429, jsonCT, `{"error":{"code":"rate_limited","message":"m"}}`, true},
		{"429", "POST /v1/prompts", 429, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3"}}, `{"error":{"code":"rate_limited","message":"m"}}`, false},
		{"events", "GET /v1/events", 200, sseCT, ": promptkit events\n\n" + event("3", "job.state_changed", sc) + ": keep-alive\n\n" + "id: 4\nevent: job.st", false},
		{"events, not read", "GET /v1/events", 200, sseCT, "", false},
		{"events, wrong name", "GET /v1/events", 200, sseCT, event("3", "job.changed", sc), true},
		{"events, id is not seq", "GET /v1/events", 200, sseCT, event("4", "job.state_changed", sc), true},
		{"events, bad data", "GET /v1/events", 200, sseCT, event("3", "job.state_changed", `{"seq":3}`), true},
		{"events as JSON", "GET /v1/events", 200, jsonCT, `{}`, true},
	} {
		rec := &oasRecorder{TB: t}
		body := []byte(c.body)
		if c.name == "events, not read" {
			body = nil
		}
		checkResponse(rec, c.route, c.status, c.header, body)
		if rec.failed != c.fails {
			t.Errorf("%s: failed = %v, want %v (%s)", c.name, rec.failed, c.fails, strings.Join(rec.msgs, "; "))
		}
	}

	rec := &oasRecorder{TB: t}
	checkEventData(rec, []byte(`{"seq":1,"prompt_id":"p","job_id":"j","state":"queued","attempt":1,"at":"2026-12-03T12:00:00Z","x":1}`))
	if !rec.failed {
		t.Error("checkEventData accepts an unknown field")
	}
}

// oasRecorder is a testing.TB that records failures instead of failing.
type oasRecorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *oasRecorder) Helper() {}

func (r *oasRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *oasRecorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
