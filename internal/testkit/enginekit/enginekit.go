// Package enginekit builds the engines tests run on: the engine part of
// the test kit (see package testkit). Simulated is an engine on the
// built-in simulated backend (internal/simulate), which answers in memory;
// Provider is one whose only backend is an OpenAI-compatible server,
// usually a providertest.Server the test scripts.
//
// It imports the library, so the root package's internal tests cannot use
// it; its external tests (package promptkit_test) can.
package enginekit

import (
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/simulate"
)

// The names Provider's configuration uses.
const (
	// BackendID is the provider backend's ID.
	BackendID = "fake"
	// ProfileID is its one profile, the default.
	ProfileID = "default"
	// Model is the profile's model.
	Model = "m"
)

// Simulated returns an engine on simulate.Config (one simulated backend,
// profile "default"), after mods adjust the configuration. A
// configuration the library refuses fails t.
func Simulated(t testing.TB, mods ...func(*promptkit.Config)) *promptkit.Engine {
	t.Helper()
	return New(t, simulate.Config(), mods...)
}

// ProviderConfig is the configuration of an engine whose only backend,
// BackendID, is the OpenAI-compatible server at url, with one profile,
// ProfileID, on Model.
func ProviderConfig(url string) promptkit.Config {
	return promptkit.Config{
		Backends: []promptkit.Backend{{ID: BackendID, BaseURL: url}},
		Profiles: []promptkit.Profile{{ID: ProfileID, Backend: BackendID, Model: Model}},
	}
}

// Provider returns an engine on ProviderConfig(url), after mods adjust the
// configuration. A configuration the library refuses fails t.
func Provider(t testing.TB, url string, mods ...func(*promptkit.Config)) *promptkit.Engine {
	t.Helper()
	return New(t, ProviderConfig(url), mods...)
}

// New returns an engine on cfg after mods adjust it; promptkit.New's
// error fails t.
func New(t testing.TB, cfg promptkit.Config, mods ...func(*promptkit.Config)) *promptkit.Engine {
	t.Helper()
	for _, m := range mods {
		m(&cfg)
	}
	eng, err := promptkit.New(cfg)
	if err != nil {
		t.Fatalf("enginekit: promptkit.New: %v", err)
	}
	return eng
}

// Retries sets Config.TransientRetries to n (0: no retry inside a run).
func Retries(n int) func(*promptkit.Config) {
	return func(c *promptkit.Config) { c.TransientRetries = &n }
}

// Profiles replaces the profiles with one per ID, each a copy of the
// first profile under that ID.
func Profiles(ids ...string) func(*promptkit.Config) {
	return func(c *promptkit.Config) {
		base := c.Profiles[0]
		c.Profiles = nil
		for _, id := range ids {
			p := base
			p.ID = id
			c.Profiles = append(c.Profiles, p)
		}
	}
}
