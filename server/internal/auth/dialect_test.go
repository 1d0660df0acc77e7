package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// oneToken is a store holding one valid token, secret "pk_valid".
type oneToken struct{ jobs.Store }

func (oneToken) HasTokens(context.Context) (bool, error) { return true, nil }

func (oneToken) TokenByHash(_ context.Context, hash []byte) (jobs.Token, error) {
	if !bytes.Equal(hash, jobs.HashToken("pk_valid")) {
		return jobs.Token{}, jobs.ErrNotFound
	}
	return jobs.Token{ID: "tok_1", OrgID: "acme", UserID: "ann", Role: jobs.RoleMember}, nil
}

// TestDialectCredential: a dialect reads its callers' key from its own
// header (here x-api-key, as Anthropic's API does) through its
// Credential, and answers a 401 in its own shape, challenge and hint,
// with no change to how Auth identifies.
func TestDialectCredential(t *testing.T) {
	t.Parallel()
	xAPIKey := httpapi.NewDialect(httpapi.DialectSpec{Name: "x-api-key", KeyHint: "x-api-key: pk_...",
		Credential: func(r *http.Request) (string, bool) {
			k := r.Header.Get("X-Api-Key")
			return k, k != ""
		},
		Body: func(p *httpapi.Problem) any {
			return map[string]string{"type": "error", "kind": string(p.Kind), "message": p.Sentence}
		}})
	a := New(Config{Store: oneToken{}, Now: time.Now, Log: slog.New(slog.DiscardHandler)})
	a.SetLoopback(true)
	var who Identity
	h := a.Require(xAPIKey, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who = Of(r)
	}))
	for _, c := range []struct {
		name, header, value string
		ok                  bool
	}{
		{"its header", "X-Api-Key", "pk_valid", true},
		{"an unknown key", "X-Api-Key", "pk_nope", false},
		{"another dialect's header", "Authorization", "Bearer pk_valid", false},
		{"nothing", "", "", false},
	} {
		who = Identity{}
		req := httptest.NewRequest(http.MethodGet, "/v1/messages", nil)
		if c.header != "" {
			req.Header.Set(c.header, c.value)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if c.ok {
			if rec.Code != http.StatusOK || who.Key != "tok_1" || who.Org != "acme" {
				t.Errorf("%s: %d as %+v, want the token's identity", c.name, rec.Code, who)
			}
			continue
		}
		var body map[string]string
		if rec.Code != http.StatusUnauthorized || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			t.Fatalf("%s: %d %s, want a 401", c.name, rec.Code, rec.Body)
		}
		want := "A valid promptkit token is required: send it as the API key (x-api-key: pk_...)."
		if body["kind"] != "unauthenticated" || body["message"] != want {
			t.Errorf("%s: body %v, want kind unauthenticated and %q", c.name, body, want)
		}
		if got := rec.Header().Get("WWW-Authenticate"); got != "" {
			t.Errorf("%s: WWW-Authenticate %q from a dialect with no challenge", c.name, got)
		}
	}
}
