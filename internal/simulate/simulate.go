// Package simulate provides the built-in simulated backend: the providertest
// fake provider served in memory, so promptkit works on a fresh machine with
// no model, no network and no configuration. Everything it answers is
// generated locally and labelled as such.
package simulate

import (
	"net/http"
	"net/http/httptest"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// BackendID and Model label everything the simulated backend produces.
const (
	BackendID = "simulated"
	Model     = "promptkit-simulated"
	ProfileID = "default"
)

// ReplyPrefix starts every text answer of the simulated backend, so a user
// can tell at a glance that no configured backend answered.
const ReplyPrefix = "promptkit simulated backend (no backend configured): "

// Notice is what programs print when they fall back to the simulation.
const Notice = "using the built-in SIMULATED backend (no backend configured): replies are generated locally, not by a model"

// Config returns an engine configuration with one simulated backend and a
// "default" profile using it.
func Config() promptkit.Config {
	return promptkit.Config{
		Backends: []promptkit.Backend{{ID: BackendID, BaseURL: "http://simulated.invalid/v1"}},
		Profiles: []promptkit.Profile{{ID: ProfileID, Backend: BackendID, Model: Model}},
		// Nothing reads the requests the handler records: keeping one,
		// not every one, keeps a long-running serve's memory flat.
		HTTPClient: &http.Client{Transport: transport{h: providertest.NewHandler(providertest.WithModel(Model), providertest.WithMaxRecorded(1), providertest.WithReplyPrefix(ReplyPrefix))}},
	}
}

// transport answers every request from the handler, in memory.
type transport struct{ h http.Handler }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close() // RoundTrippers must close the request body
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}
