package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// nulValue is a query value holding a NUL, and notUTF8 one with a byte
// that is not UTF-8; no answer may quote either.
const (
	nulValue = "x%00QUOTED-VALUE"
	notUTF8  = "x%ffQUOTED-VALUE"
)

// nulRefused checks that r is the 400 of a NUL (or of bytes that are not
// UTF-8) in query parameter param
// ("" when the parameter is not one the route documents, which the answer
// must not name either), in the route's dialect, quoting nothing.
func nulRefused(t *testing.T, what string, r resp, openai bool, param string) {
	t.Helper()
	if r.code != http.StatusBadRequest {
		t.Errorf("%s: %d %s, want 400", what, r.code, r.body)
		return
	}
	if strings.Contains(string(r.body), "QUOTED-VALUE") || strings.Contains(string(r.body), `\u0000`) {
		t.Errorf("%s: the answer quotes the value: %s", what, r.body)
	}
	var body struct {
		Error struct {
			Code, Message, Type string
			Param               *string
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("%s: %s: %v", what, r.body, err)
	}
	e := body.Error
	got := ""
	if e.Param != nil {
		got = *e.Param
	}
	switch {
	case openai && (e.Type != "invalid_request_error" || got != param):
		t.Errorf("%s: %s, want an invalid_request_error with param %q", what, r.body, param)
	case !openai && e.Code != "invalid_request":
		t.Errorf("%s: %s, want code invalid_request", what, r.body)
	case param != "" && !strings.Contains(e.Message, param):
		t.Errorf("%s: message %q does not name %s", what, e.Message, param)
	case param == "" && strings.Contains(e.Message, "bogus"):
		t.Errorf("%s: message %q names a parameter the route does not have", what, e.Message)
	}
}

// TestQueryNUL: a NUL in a query parameter, or bytes that are not UTF-8
// (which PostgreSQL refuses as it does a NUL), is a 400 naming the
// parameter on both stores — the reproductions of issue 40 first, then
// every query parameter the API document declares on every operation
// under /v1, and a parameter no route has — and never an error logged.
func TestQueryNUL(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		e.queue("acme", 1, jobs.EnqueueParams{})
		for _, c := range []struct {
			path, param string
			openai      bool
		}{
			{"/v1/usage?start_time=1700000000&user_ids=" + nulValue, "user_ids", false},
			{"/v1/usage?start_time=1700000000&api_key_ids=" + nulValue, "api_key_ids", false},
			{"/v1/usage?start_time=1700000000&models=" + nulValue, "models", false},
			{"/v1/usage?start_time=1700000000&backends=" + nulValue, "backends", false},
			{"/v1/files?after=" + nulValue, "after", true},
			{"/v1/batches?after=" + nulValue, "after", true},
			{"/v1/admin/batches?cursor=" + nulValue, "cursor", false},
			{"/v1/admin/tokens?org=" + nulValue, "org", false},
			{"/v1/admin/overview?org=" + nulValue, "org", false},
			{"/v1/admin/jobs?org=acme&user=" + nulValue, "user", false},
			// A NUL in a name, or in a parameter no route reads.
			{"/v1/admin/tokens?or%00g=1", "", false},
			{"/v1/admin/tokens?bogus=" + nulValue, "", false},
			{"/v1/files?bogus=" + nulValue, "", true},
			// Bytes that are not UTF-8.
			{"/v1/usage?start_time=1700000000&user_ids=" + notUTF8, "user_ids", false},
			{"/v1/files?after=" + notUTF8, "after", true},
			{"/v1/admin/batches?cursor=" + notUTF8, "cursor", false},
			{"/v1/admin/tokens?org=" + notUTF8, "org", false},
			{"/v1/admin/tokens?or%ffg=1", "", false},
		} {
			nulRefused(t, "GET "+c.path, e.callGuarded("GET", c.path), c.openai, c.param)
		}

		// Every documented query parameter of every operation.
		doc := oasDoc(t)
		paths, _ := doc["paths"].(map[string]any)
		n := 0
		for path, it := range paths {
			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			item := it.(map[string]any)
			for _, method := range oasMethods {
				o, ok := item[method].(map[string]any)
				if !ok {
					continue
				}
				tags, _ := o["tags"].([]any)
				openai := slices.Contains(tags, any("openai"))
				params := []string{"bogus"}
				for _, p := range append(asList(item["parameters"]), asList(o["parameters"])...) {
					prm, _, err := oasDeref(doc, p, "")
					if err != nil {
						t.Fatal(err)
					}
					if prm["in"] == "query" {
						params = append(params, prm["name"].(string))
					}
				}
				target := pathParam.ReplaceAllString(path, oasJob1)
				for _, p := range params {
					want := p
					if p == "bogus" {
						want = ""
					}
					m := strings.ToUpper(method)
					for _, v := range []string{nulValue, notUTF8} {
						r := e.callGuarded(m, target+"?"+url.QueryEscape(p)+"="+v)
						nulRefused(t, m+" "+path+" ?"+p+"="+v, r, openai, want)
						n++
					}
				}
			}
		}
		if n < 100 {
			t.Fatalf("only %d requests made: is the document read right?", n)
		}
		if e.logs.Contains("level=ERROR") {
			t.Errorf("a NUL in a query parameter was logged as an error:\n%s", e.logs.String())
		}
	})
}

// callGuarded is call without a token or a body, ended after a minute: a
// route that took the request (an event stream, a wait) would otherwise
// hold it open.
func (e *env) callGuarded(method, path string) resp {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL()+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.send(req)
}

// pathParam is a path template's parameter.
var pathParam = regexp.MustCompile(`\{[^}]+\}`)

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
