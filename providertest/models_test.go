package providertest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/providertest"
)

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func get(t *testing.T, url string) result {
	t.Helper()
	r, err := do(context.Background(), http.MethodGet, url, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func listModels(t *testing.T, url string) []string {
	t.Helper()
	r := get(t, url)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %q %s", url, r.status, r.header.Get("Content-Type"), r.body)
	}
	var l modelList
	if err := json.Unmarshal(r.body, &l); err != nil || l.Object != "list" {
		t.Fatalf("list %s (%v)", r.body, err)
	}
	var ids []string
	for _, m := range l.Data {
		if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
			t.Errorf("model entry %+v incomplete", m)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

func TestModelsList(t *testing.T) {
	tests := []struct {
		name string
		opts []providertest.Option
		want string
	}{
		{"default", nil, "providertest"},
		{"WithModel", []providertest.Option{providertest.WithModel("fixed")}, "fixed"},
		{"WithModels", []providertest.Option{providertest.WithModels("a", "b/c")}, "a,b/c"},
		{"both, deduplicated", []providertest.Option{providertest.WithModels("x", "fixed", ""), providertest.WithModel("fixed"), providertest.WithModels("x")}, "fixed,x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.opts...)
			if got := strings.Join(listModels(t, s.URL+"/models"), ","); got != tt.want {
				t.Errorf("models %s, want %s", got, tt.want)
			}
			// Without /v1 as well, as for chat completions.
			base := strings.TrimSuffix(s.URL, "/v1")
			if got := strings.Join(listModels(t, base+"/models"), ","); got != tt.want {
				t.Errorf("models without /v1 %s, want %s", got, tt.want)
			}
		})
	}
}

func TestModelsGet(t *testing.T) {
	s := newServer(t, providertest.WithModel("fixed"), providertest.WithModels("org/name"))
	for _, id := range []string{"fixed", "org/name"} {
		r := get(t, s.URL+"/models/"+id)
		var m model
		if err := json.Unmarshal(r.body, &m); r.status != 200 || err != nil || m.ID != id || m.Object != "model" {
			t.Errorf("GET models/%s: %d %s", id, r.status, r.body)
		}
	}
	r := get(t, s.URL+"/models/other")
	e, _ := r.decode(t)["error"].(map[string]any)
	if r.status != 404 || e["code"] != "model_not_found" || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), "'other'") {
		t.Errorf("unknown model: %d %s", r.status, r.body)
	}
	r, err := do(context.Background(), http.MethodPost, s.URL+"/models", "{}")
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 405 || r.header.Get("Allow") != "GET" {
		t.Errorf("POST models: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	// Models requests are counted and recorded but use no scripted reply
	// and no rate-limit capacity.
	want := providertest.Stats{Requests: 4, Models: 2, Rejected: 2}
	if st := s.Stats(); st != want {
		t.Errorf("Stats %+v, want %+v", st, want)
	}
	if rq := s.Requests()[0]; rq.Method != http.MethodGet || rq.Path != "/v1/models/fixed" {
		t.Errorf("recorded %s %s", rq.Method, rq.Path)
	}
}

// Without configured models the fake serves any model, so it describes any.
func TestModelsGetUnconfigured(t *testing.T) {
	s := newServer(t)
	s.Enqueue(providertest.Reply("kept"))
	r := get(t, s.URL+"/models/gpt-4o-mini")
	var m model
	if err := json.Unmarshal(r.body, &m); r.status != 200 || err != nil || m.ID != "gpt-4o-mini" {
		t.Errorf("GET models/gpt-4o-mini: %d %s", r.status, r.body)
	}
	if s.Pending() != 1 {
		t.Error("a models request took a scripted reply")
	}
}
