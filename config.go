package promptkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/pktype"
)

// Config configures an Engine. Build it in code, or load backends and
// profiles with LoadConfig and prompts with LoadPrompts.
type Config struct {
	// Backends are the OpenAI-compatible endpoints profiles run on.
	Backends []Backend
	// Profiles select a backend, a model and generation parameters.
	Profiles []Profile
	// Prompts are the named prompt templates RunRequest.PromptID refers to.
	Prompts []Prompt
	// Prices say what each model's tokens cost, so that attempts, runs
	// and the job service's usage ledger carry a cost (see Cost). A model
	// without a price, like a call whose usage the provider did not
	// report, has an unknown cost, never zero. One entry per model.
	Prices []Price
	// DefaultProfile is used when a RunRequest names no profile. Defaults to
	// the profile "default" if there is one, else to the only profile.
	DefaultProfile string
	// MaxConcurrentRuns bounds runs executing at once (logical admission,
	// held for a whole run including repairs). Defaults to 0, unlimited.
	MaxConcurrentRuns int
	// MaxQueuedRuns bounds runs waiting for admission once MaxConcurrentRuns
	// are executing; a run past it fails at once with ErrCapacity.
	// Defaults to 0, unlimited.
	MaxQueuedRuns int
	// LLMClient, if non-nil, replaces the built-in HTTP client for every
	// backend. Backends then need no BaseURL, but still bound concurrency.
	LLMClient LLMClient
	// HTTPClient is used by the built-in client. Defaults to a client
	// without an overall timeout (Backend.Timeout bounds each attempt).
	// A custom client still gets the engine's transient retries; set
	// TransientRetries to zero if its transport retries on its own.
	HTTPClient *http.Client
	// TransientRetries is how many extra attempts a generation may make
	// after a 429, 500, 502, 503 or 504 from the built-in client, with
	// backoff and Retry-After honoured. Nil means 2; zero disables retries;
	// negative is ErrInvalidConfig. RunRequest.TransientRetries overrides it
	// per run. An injected LLMClient is never retried. Each repair
	// generation gets the same budget, so one run makes at most
	// (R+1)×(P+1) provider calls, P being the profile's RepairBudget.
	TransientRetries *int
}

// DefaultTransientRetries is the retry budget when Config.TransientRetries
// is nil.
const DefaultTransientRetries = 2

// Backend is one OpenAI-compatible endpoint.
type Backend struct {
	// ID names the backend; profiles refer to it.
	ID string `yaml:"id" json:"id"`
	// BaseURL is the API root; the client posts to BaseURL+"/chat/completions".
	// Required unless Config.LLMClient is set.
	BaseURL string `yaml:"base_url" json:"base_url"`
	// APIKeyEnv names the environment variable holding the API key. It is
	// read when a generation starts, never stored. If set and the variable
	// is empty, runs fail with ErrInvalidRequest. Defaults to no key.
	APIKeyEnv string `yaml:"api_key_env" json:"api_key_env,omitempty"`
	// MaxActive bounds requests in flight on this backend across all runs.
	// Defaults to 0, unlimited.
	MaxActive int `yaml:"max_active" json:"max_active,omitempty"`
	// MaxIdleConns is how many idle connections the built-in client keeps
	// open to this backend for reuse, so that calls in flight at once do
	// not each open a new TCP and TLS connection. Ignored with
	// Config.HTTPClient. Defaults to MaxActive, or 100 when that is 0.
	MaxIdleConns int `yaml:"max_idle_conns" json:"max_idle_conns,omitempty"`
	// Timeout bounds each attempt of the built-in client, from dispatch to
	// the decoded response. An injected LLMClient owns its timeouts, as it
	// owns its retries. Defaults to 60s.
	Timeout time.Duration `yaml:"timeout" json:"timeout,omitempty"`
	// RequestsPerSecond paces requests to this backend across all runs:
	// dispatches are spaced evenly, at 98% of this rate so that timing
	// jitter does not push a provider that enforces exactly this limit
	// over it. It is an upper bound: a rate learned from the provider
	// (LearnRate) only lowers it. Defaults to 0, unpaced (but learning).
	RequestsPerSecond float64 `yaml:"requests_per_second" json:"requests_per_second,omitempty"`
	// TokensPerMinute paces requests by estimated tokens (a quarter of the
	// request's message bytes plus max_tokens), with up to a minute's
	// tokens in one burst; a response that reports more total tokens than
	// estimated delays later requests by the difference. Defaults to 0,
	// unpaced.
	TokensPerMinute int `yaml:"tokens_per_minute" json:"tokens_per_minute,omitempty"`
	// PauseOnRetryAfter makes a provider's Retry-After on a 429 or 503
	// pause every caller of this backend until that time, not only the
	// run that received it, so callers stop colliding with a provider
	// that asked them to wait. Defaults to on.
	PauseOnRetryAfter *bool `yaml:"pause_on_retry_after" json:"pause_on_retry_after,omitempty"`
	// LearnRate makes this backend's pacer learn the provider's limit:
	// it spends the budgets that rate-limit headers report (OpenAI's
	// x-ratelimit-*, the IETF draft's ratelimit-*) and waits for their
	// reset, and without headers it lowers its request rate on a 429 and
	// probes back up while none comes. RequestsPerSecond and
	// TokensPerMinute stay upper bounds. Engine.Pacing shows what it
	// learned. Defaults to on; turn it off to pace by configuration only.
	LearnRate *bool `yaml:"learn_rate" json:"learn_rate,omitempty"`
	// Cooldown is how long model groups (Profile.Backends) avoid this
	// backend after it failed as unwell: a 5xx, a timeout or transport
	// failure, or a 429 after every transient retry. Then one probe at a
	// time goes to it until one is answered. Defaults to 30s: long
	// enough that a dead backend costs the group about one failed
	// request per half minute per process instead of one per run, short
	// enough that a backend back from a restart or a brief outage takes
	// its share again within one. See docs/routing.md.
	Cooldown time.Duration `yaml:"cooldown" json:"cooldown,omitempty"`
}

// Profile is a named way to run prompts: a backend, a model and parameters.
type Profile struct {
	// ID names the profile.
	ID string `yaml:"id" json:"id"`
	// Label is the profile's name for people, such as "Careful (slower)":
	// the browser page shows it in place of the id. Optional; without it
	// the page shows a name made from the id.
	Label string `yaml:"label" json:"label,omitempty"`
	// Backend is the ID of the Backend to use. Exactly one of Backend
	// and Backends is required, unless Config.LLMClient is set.
	Backend string `yaml:"backend" json:"backend"`
	// Backends makes the profile a model group: its model served by
	// several backends, one chosen per attempt by weight among those that
	// are well, the fallbacks only when no other is (docs/routing.md).
	Backends []ProfileBackend `yaml:"backends" json:"backends,omitempty"`
	// Model is sent as the request's model. Required.
	Model string `yaml:"model" json:"model"`
	// Sampling (Temperature, TopP, MaxTokens, Stop) is sent when set; a
	// RunRequest may override each of them. Seed is a RunRequest's: a
	// config file has no seed key, and one set here in code is the
	// default of the profile's runs, like the others. Extra (YAML extra:
	// a mapping) holds further parameters sent as given, such as a
	// self-hosted server's top_k or chat_template_kwargs; a run's extra
	// parameters override the profile's by name.
	Sampling `yaml:",inline"`
	// System is sent as the first (system) message when non-empty.
	System string `yaml:"system" json:"system,omitempty"`
	// Validate turns output-schema validation on or off. Defaults to on.
	Validate *bool `yaml:"validate" json:"validate,omitempty"`
	// RepairBudget is how many repair generations may follow an output that
	// fails the output schema (the prompt's or the request's), or is not
	// the JSON object a request asked for. Defaults to 0.
	RepairBudget int `yaml:"repair_budget" json:"repair_budget,omitempty"`
	// StructuredOutput sends the output schema as the request's
	// response_format (type json_schema), and RunRequest.JSONObject as type
	// json_object. Defaults to on; turn it off for backends that reject
	// response_format (outputs are still validated).
	StructuredOutput *bool `yaml:"structured_output" json:"structured_output,omitempty"`
}

// ProfileBackend is one backend of a model group (Profile.Backends).
type ProfileBackend struct {
	// ID is the Backend's ID.
	ID string `yaml:"id" json:"id"`
	// Weight is the backend's share of the group's attempts among the
	// primaries that are well: weights 3 and 1 split them 3:1. Defaults
	// to 1; must be 0 for a fallback.
	Weight int `yaml:"weight" json:"weight,omitempty"`
	// Fallback makes the backend a fallback: used only when no primary
	// (an entry without Fallback) is available, the fallbacks in the
	// order listed. That is how an order is expressed: one primary and
	// fallbacks after it.
	Fallback bool `yaml:"fallback" json:"fallback,omitempty"`
	// Model is the model's name on this backend, for providers that name
	// the same model differently. Defaults to the profile's Model.
	Model string `yaml:"model" json:"model,omitempty"`
}

// clone returns a deep copy of p, so that the engine's profile and a
// caller's cannot change each other.
func (p Profile) clone() Profile {
	p.Backends = slices.Clone(p.Backends)
	p.Sampling = p.Sampling.Clone()
	p.Validate = clonePtr(p.Validate)
	p.StructuredOutput = clonePtr(p.StructuredOutput)
	return p
}

// Prompt is a named, versioned prompt template.
type Prompt struct {
	// ID names the prompt.
	ID string `json:"id"`
	// Version is free-form and reported in results.
	Version string `json:"version,omitempty"`
	// Description is for people.
	Description string `json:"description,omitempty"`
	// Template is a text/template body rendered with the run's inputs as
	// its data (a map); a missing input is an error.
	Template string `json:"template"`
	// InputSchema, if set, is the JSON Schema the inputs must satisfy.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// OutputSchema, if set, is the JSON Schema the output must satisfy; the
	// output is then parsed as JSON and RunResult.Output carries it.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

const defaultTimeout = 60 * time.Second

// DefaultCooldown is Backend.Cooldown when zero; see docs/routing.md.
const DefaultCooldown = dispatch.DefaultCooldown

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// fieldError is a config problem located by a field path.
type fieldError struct {
	source string // file name, or "Config"
	field  string // e.g. backends[0].base_url
	msg    string
}

func (e *fieldError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.source, e.field, e.msg)
}

func (e *fieldError) Is(target error) bool { return target == ErrInvalidConfig }

// validateConfig checks cfg; source names where it came from.
func validateConfig(cfg *Config, source string) error {
	bad := func(field, format string, args ...any) error {
		return &fieldError{source: source, field: field, msg: fmt.Sprintf(format, args...)}
	}
	if cfg.MaxConcurrentRuns < 0 {
		return bad("max_concurrent_runs", "must not be negative")
	}
	if cfg.MaxQueuedRuns < 0 {
		return bad("max_queued_runs", "must not be negative")
	}
	if cfg.TransientRetries != nil && *cfg.TransientRetries < 0 {
		return bad("transient_retries", "must not be negative")
	}
	backends := map[string]bool{}
	for i, b := range cfg.Backends {
		f := fmt.Sprintf("backends[%d]", i)
		if err := checkID(backends, b.ID, "backend", f+".id", bad); err != nil {
			return err
		}
		if b.BaseURL == "" && cfg.LLMClient == nil {
			return bad(f+".base_url", "required")
		}
		if b.BaseURL != "" {
			u, err := url.Parse(b.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad(f+".base_url", "must be an absolute http or https URL")
			}
			if u.User != nil {
				return bad(f+".base_url", "must not contain credentials; use api_key_env")
			}
		}
		if b.MaxActive < 0 {
			return bad(f+".max_active", "must not be negative")
		}
		if b.MaxIdleConns < 0 {
			return bad(f+".max_idle_conns", "must not be negative")
		}
		if b.Timeout < 0 {
			return bad(f+".timeout", "must not be negative")
		}
		if b.RequestsPerSecond < 0 || math.IsNaN(b.RequestsPerSecond) || math.IsInf(b.RequestsPerSecond, 0) {
			return bad(f+".requests_per_second", "must be a non-negative number")
		}
		if b.TokensPerMinute < 0 {
			return bad(f+".tokens_per_minute", "must not be negative")
		}
		if b.Cooldown < 0 {
			return bad(f+".cooldown", "must not be negative")
		}
	}
	profiles := map[string]bool{}
	for i, p := range cfg.Profiles {
		f := fmt.Sprintf("profiles[%d]", i)
		if err := checkID(profiles, p.ID, "profile", f+".id", bad); err != nil {
			return err
		}
		switch {
		case p.Backend != "" && len(p.Backends) > 0:
			return bad(f+".backends", "set backend or backends, not both")
		case p.Backend == "" && len(p.Backends) == 0 && cfg.LLMClient == nil:
			return bad(f+".backend", "required (or backends)")
		case p.Backend != "" && !backends[p.Backend]:
			return bad(f+".backend", "unknown backend %q", p.Backend)
		}
		if err := checkGroup(p.Backends, backends, f+".backends", bad); err != nil {
			return err
		}
		if p.Model == "" {
			return bad(f+".model", "required")
		}
		if p.RepairBudget < 0 {
			return bad(f+".repair_budget", "must not be negative")
		}
		if p.MaxTokens != nil && *p.MaxTokens <= 0 {
			return bad(f+".max_tokens", "must be positive")
		}
		if p.Temperature != nil && (*p.Temperature < 0 || *p.Temperature > 2) {
			return bad(f+".temperature", "must be between 0 and 2")
		}
		if p.TopP != nil && (*p.TopP < 0 || *p.TopP > 1) {
			return bad(f+".top_p", "must be between 0 and 1")
		}
		if err := pktype.CheckParams(p.Extra, ""); err != nil {
			fe, _ := errors.AsType[*pktype.FieldError](err)
			return bad(f+".extra."+fe.Field, "%s", fe.Reason)
		}
	}
	if cfg.DefaultProfile != "" && !profiles[cfg.DefaultProfile] {
		return bad("default_profile", "unknown profile %q", cfg.DefaultProfile)
	}
	models := map[string]bool{}
	for i, p := range cfg.Prices {
		f := fmt.Sprintf("prices[%d]", i)
		if p.Model == "" {
			return bad(f+".model", "required")
		}
		if models[p.Model] {
			return bad(f+".model", "duplicate price for model %q", p.Model)
		}
		models[p.Model] = true
		for _, v := range []struct {
			name  string
			value float64
		}{{"input_per_million", p.Input}, {"output_per_million", p.Output}, {"cached_input_per_million", p.CachedInput},
			{"reasoning_per_million", p.Reasoning}} {
			if v.value < 0 || math.IsNaN(v.value) || math.IsInf(v.value, 0) {
				return bad(f+"."+v.name, "must be a non-negative number")
			}
		}
	}
	prompts := map[string]bool{}
	for i, p := range cfg.Prompts {
		if err := checkID(prompts, p.ID, "prompt", fmt.Sprintf("prompts[%d].id", i), bad); err != nil {
			return err
		}
	}
	return nil
}

// checkGroup checks a profile's model group.
func checkGroup(group []ProfileBackend, backends map[string]bool, field string, bad func(field, format string, args ...any) error) error {
	seen := map[string]bool{}
	primary := false
	for i, b := range group {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case b.ID == "":
			return bad(f+".id", "required")
		case !backends[b.ID]:
			return bad(f+".id", "unknown backend %q", b.ID)
		case seen[b.ID]:
			return bad(f+".id", "backend %q is listed twice", b.ID)
		case b.Weight < 0:
			return bad(f+".weight", "must not be negative")
		case b.Fallback && b.Weight != 0:
			return bad(f+".weight", "does not apply to a fallback, which is used in order")
		}
		seen[b.ID] = true
		primary = primary || !b.Fallback
	}
	if len(group) > 0 && !primary {
		return bad(field, "needs at least one backend that is not a fallback")
	}
	return nil
}

// checkID checks that id is well formed and not yet in seen, then adds it.
func checkID(seen map[string]bool, id, kind, field string, bad func(field, format string, args ...any) error) error {
	if !idPattern.MatchString(id) {
		return bad(field, "must match %s", idPattern)
	}
	if seen[id] {
		return bad(field, "duplicate %s %q", kind, id)
	}
	seen[id] = true
	return nil
}
