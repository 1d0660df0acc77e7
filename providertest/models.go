package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// defaultModel names the model when neither the handler nor the request
// does.
const defaultModel = "providertest"

// modelCreated is the fixed "created" time of every listed model
// (2024-01-01T00:00:00Z), so listings are the same on every run.
const modelCreated = 1704067200

type (
	modelObject struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	modelList struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}
)

func newModel(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: modelCreated, OwnedBy: defaultModel}
}

// modelsPath reports whether path is a models route: .../models lists,
// .../models/{id} describes one model (the id may contain slashes, as
// "org/name" ids do).
func modelsPath(path string) (id string, ok bool) {
	if strings.HasSuffix(path, "/models") {
		return "", true
	}
	i := strings.Index(path, "/models/")
	if i < 0 {
		return "", false
	}
	return path[i+len("/models/"):], true
}

// knownModels returns the configured model names (WithModel first, then
// WithModels), without blanks or repeats; nil when none is configured.
func (h *Handler) knownModels() []string {
	var out []string
	seen := make(map[string]bool)
	for _, m := range append([]string{h.model}, h.models...) {
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// modelsReplyLocked answers GET .../models (id "") and GET
// .../models/{id}, counting the answer.
func (h *Handler) modelsReplyLocked(id string) *reply {
	known := h.knownModels()
	if id == "" {
		list := modelList{Object: "list", Data: []modelObject{}}
		if known == nil {
			known = []string{defaultModel}
		}
		for _, m := range known {
			list.Data = append(list.Data, newModel(m))
		}
		h.stats.Models++
		b, _ := json.Marshal(list)
		return &reply{status: http.StatusOK, body: b}
	}
	// Without configured models the fake serves any model name, so it
	// describes any id.
	found := known == nil
	for _, m := range known {
		found = found || m == id
	}
	if !found {
		h.stats.Rejected++
		return &reply{
			status: http.StatusNotFound,
			body:   errorJSON(fmt.Sprintf("The model '%s' does not exist or you do not have access to it.", id), "invalid_request_error", "model_not_found"),
		}
	}
	h.stats.Models++
	b, _ := json.Marshal(newModel(id))
	return &reply{status: http.StatusOK, body: b}
}
