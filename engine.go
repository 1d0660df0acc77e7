package promptkit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/promptkit/promptkit/internal/dispatch"
	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/internal/observe"
	"github.com/promptkit/promptkit/internal/openai"
	"github.com/promptkit/promptkit/pktype"
)

// Engine runs prompts. It is safe for concurrent use; create one per
// application and share it, so that its capacity limits apply to all runs.
type Engine struct {
	backends       map[string]*backendRuntime
	profiles       map[string]Profile
	prompts        map[string]*promptRuntime
	defaultProfile string
	sched          *dispatch.Scheduler
	client         LLMClient
	retries        uint64
	prices         map[string]*Price // by model

	// Test seams; production uses the defaults set in New.
	now      func() time.Time
	newID    func() (string, error)
	getenv   func(string) string
	validate func(*compiledSchema, string) (json.RawMessage, []string, error)
}

// seams are the private test hooks: clock, jitter, cancellable wait, run
// IDs and output validation (to make it fail). Zero fields select the real
// ones.
type seams struct {
	now      func() time.Time
	jitter   func(time.Duration) time.Duration
	wait     func(context.Context, time.Duration) error
	newID    func() (string, error)
	validate func(*compiledSchema, string) (json.RawMessage, []string, error)
}

type backendRuntime struct {
	Backend
	endpoint openai.Endpoint
}

type promptRuntime struct {
	Prompt
	tmpl   *template.Template
	input  *compiledSchema
	output *compiledSchema
}

// RunRequest asks for one run: a named prompt with inputs, ad-hoc text,
// or a whole conversation (Messages). Exactly one of PromptID, Text and
// Messages is set.
type RunRequest struct {
	// PromptID names a loaded prompt; Inputs are its template data.
	PromptID string         `json:"prompt_id,omitempty"`
	Inputs   map[string]any `json:"inputs,omitempty"`
	// Text is an ad-hoc user message, used instead of PromptID.
	Text string `json:"text,omitempty"`
	// Messages is a whole conversation (roles system, user, assistant and
	// tool), sent as given after the profile's system message, instead of
	// PromptID or Text. It excludes History.
	Messages []Message `json:"messages,omitempty"`
	// History is earlier conversation, placed after the profile's system
	// message and before the prompt.
	History []Message `json:"history,omitempty"`
	// ProfileID selects the profile. Defaults to Config.DefaultProfile.
	ProfileID string `json:"profile_id,omitempty"`
	// Model overrides the profile's model.
	Model string `json:"model,omitempty"`
	// Backend runs the profile on this backend instead of its own, alone:
	// a model group does not route a pinned run. The backend must serve
	// the request's model: some profile uses it with that model, as its
	// backend or in its group (by the profile's model, sent with the
	// group's name for it there, or by that name); otherwise the request
	// is ErrInvalidRequest.
	Backend string `json:"backend,omitempty"`
	// Sampling (Temperature, TopP, MaxTokens, Stop, Seed) overrides the
	// profile's values when set (Stop when non-empty), within the same
	// bounds. Seed asks the provider for deterministic sampling.
	Sampling
	// OutputSchema is an ad-hoc output JSON Schema (an object) for a Text
	// or Messages request, compiled for this run. The output is validated,
	// repaired within the profile's RepairBudget and sent as
	// response_format exactly like a named prompt's output schema.
	// OutputSchemaName names it in response_format (letters, digits, '_'
	// and '-', at most 64; defaults to "output").
	OutputSchema     json.RawMessage `json:"output_schema,omitempty"`
	OutputSchemaName string          `json:"output_schema_name,omitempty"`
	// JSONObject asks for a JSON object as the answer: response_format
	// json_object is sent (unless the profile turns StructuredOutput off)
	// and an output that is not a JSON object is invalid and repaired
	// like one failing a schema. It excludes OutputSchema and a named
	// prompt with an output schema.
	JSONObject bool `json:"json_object,omitempty"`
	// ToolUse offers the model function tools (Tools, ToolChoice,
	// ParallelToolCalls, OpenAI's names and forms). The model may answer
	// with calls instead of text: RunResult.ToolCalls holds them, and the
	// output is then not checked against OutputSchema or JSONObject, since
	// it is not the final answer. promptkit never runs a tool: the caller
	// runs the calls and sends their results in a next run's Messages
	// (role tool, ToolCallID set), after the assistant message that made
	// them (Message.ToolCalls).
	ToolUse
	// ResponseFormat, when set, is sent as the response_format instead of
	// the one OutputSchema or JSONObject would make (unless the profile
	// turns StructuredOutput off), as the caller wrote it: a schema's
	// strict and description, a json_object's schema as some servers take
	// it. It changes what is sent only: OutputSchema and JSONObject still
	// say how the answer is checked.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	// TransientRetries overrides Config.TransientRetries for this run. Nil
	// inherits the engine's value; zero disables retries; negative is
	// ErrInvalidRequest. PrepareExecution freezes the effective value.
	TransientRetries *int `json:"transient_retries,omitempty"`
	// Observer, if non-nil, receives this run's execution events (see
	// ExecutionObserver). PrepareExecution retains it for RunPrepared.
	Observer ExecutionObserver `json:"-"`
	// OnDelta, if non-nil, receives the answer as the backend generates
	// it: each backend call is made with "stream": true and every piece
	// of text or of a tool call is passed on as it arrives, numbered by
	// generation (a repair is a new one), attempt (a retried call starts
	// its answer again, from Index 0) and Index. Pieces of a call that
	// then fails, or of an answer that repair replaces, stay delivered:
	// the result is what counts. It is called synchronously on the run's
	// goroutine while the call holds its backend permit, so it must not
	// block for long. The result, validation, repair, usage and errors
	// are the same as without it, and so are the execution events, whose
	// attempts also report TimeToFirstDelta. An injected
	// Config.LLMClient does not stream: OnDelta is then never called.
	// PrepareExecution retains it for RunPrepared.
	OnDelta func(StreamDelta) `json:"-"`
	// NoWaitPastDeadline makes a transient retry, or a backend pause, that
	// would wait beyond ctx's deadline return its failure at once instead
	// of waiting until the deadline; NotBefore(err) then says when trying
	// again can help. A job queue uses it so that a worker never sleeps
	// through a long Retry-After. Defaults to false: waits are cancellable
	// but never refused up front.
	NoWaitPastDeadline bool `json:"no_wait_past_deadline,omitempty"`
	// WaitDeadline, with NoWaitPastDeadline, also refuses a wait that
	// would end after it, when it is sooner than ctx's deadline: a job
	// queue sets the time the client waiting for the run stops waiting,
	// without cutting short a call already made. Zero: ctx's deadline
	// alone.
	WaitDeadline time.Time `json:"wait_deadline,omitzero"`
	// BeforeCall, if non-nil, is called before every provider call of the
	// run (each transient retry and each repair included), before the
	// call waits for its backend: an error ends the run with it (wrapped,
	// errors.Is holds) and no call is made. It is told the call's
	// CallEstimate. A job queue reserves a share of a budget with it, so
	// that no call is made past the budget.
	// It is called on the run's goroutine. PrepareExecution retains it.
	BeforeCall BeforeCallFunc `json:"-"`
}

// PreparedRun describes a rendered run without executing it.
type PreparedRun struct {
	PromptID      string `json:"prompt_id,omitempty"`
	PromptVersion string `json:"prompt_version,omitempty"`
	ProfileID     string `json:"profile_id"`
	// BackendID is the backend the run goes to; empty for a model group
	// (Profile.Backends), which chooses one per attempt (RunResult.BackendID
	// says which answered).
	BackendID string `json:"backend_id,omitempty"`
	// PromptHash is "sha256:" and the hex digest of the rendered request
	// (model, messages, parameters, output schema). Equal hashes mean equal
	// provider requests; retry settings and observers never affect it.
	PromptHash string `json:"prompt_hash"`
	// Request is the initial generation request.
	Request GenerateRequest `json:"request"`
}

// New checks cfg, compiles its prompts and schemas, and returns an Engine.
// Errors match ErrInvalidConfig and name the offending field.
func New(cfg Config) (*Engine, error) {
	return newEngine(cfg, seams{})
}

func newEngine(cfg Config, sm seams) (*Engine, error) {
	if err := validateConfig(&cfg, "Config"); err != nil {
		return nil, err
	}
	e := &Engine{
		backends: map[string]*backendRuntime{},
		profiles: map[string]Profile{},
		prompts:  map[string]*promptRuntime{},
		client:   cfg.LLMClient,
		retries:  DefaultTransientRetries,
		now:      time.Now,
		getenv:   os.Getenv,
	}
	if sm.now != nil {
		e.now = sm.now
	}
	e.newID = sm.newID
	e.validate = (*compiledSchema).validateJSON
	if sm.validate != nil {
		e.validate = sm.validate
	}
	if cfg.TransientRetries != nil {
		e.retries = uint64(*cfg.TransientRetries) // validated non-negative
	}
	limits := map[string]dispatch.Backend{}
	for _, b := range cfg.Backends {
		if b.Timeout == 0 {
			b.Timeout = defaultTimeout
		}
		limits[b.ID] = dispatch.Backend{
			MaxActive:         b.MaxActive,
			RequestsPerSecond: b.RequestsPerSecond,
			TokensPerMinute:   b.TokensPerMinute,
			NoPause:           b.PauseOnRetryAfter != nil && !*b.PauseOnRetryAfter,
			NoLearn:           b.LearnRate != nil && !*b.LearnRate,
			Cooldown:          b.Cooldown,
		}
		e.backends[b.ID] = &backendRuntime{Backend: b, endpoint: openai.Endpoint{
			BackendID:  b.ID,
			BaseURL:    b.BaseURL,
			APIKeyEnv:  b.APIKeyEnv,
			Timeout:    b.Timeout,
			HTTPClient: cfg.HTTPClient,
			// One idle connection per call in flight.
			MaxIdleConns: cmp.Or(b.MaxIdleConns, b.MaxActive),
			Getenv:       func(k string) string { return e.getenv(k) },
			Now:          func() time.Time { return e.now() },
		}}
	}
	for _, p := range cfg.Profiles {
		e.profiles[p.ID] = p.clone()
	}
	e.prices = make(map[string]*Price, len(cfg.Prices))
	for _, p := range cfg.Prices {
		e.prices[p.Model] = &p
	}
	switch {
	case cfg.DefaultProfile != "":
		e.defaultProfile = cfg.DefaultProfile
	case len(cfg.Profiles) == 1:
		e.defaultProfile = cfg.Profiles[0].ID
	default:
		e.defaultProfile = "default"
	}
	for i, p := range cfg.Prompts {
		bad := func(field string, err error) error {
			return &fieldError{source: "Config", field: fmt.Sprintf("prompts[%d].%s", i, field), msg: fmt.Sprintf("prompt %q: %v", p.ID, err)}
		}
		rt := &promptRuntime{Prompt: p}
		rt.InputSchema = bytes.Clone(p.InputSchema)
		rt.OutputSchema = bytes.Clone(p.OutputSchema)
		var err error
		if rt.tmpl, err = parseTemplate(p); err != nil {
			return nil, bad("template", err)
		}
		if rt.input, err = compileSchema("promptkit:///"+p.ID+"/input.json", p.InputSchema); err != nil {
			return nil, bad("input_schema", err)
		}
		if rt.output, err = compileSchema("promptkit:///"+p.ID+"/output.json", p.OutputSchema); err != nil {
			return nil, bad("output_schema", err)
		}
		e.prompts[p.ID] = rt
	}
	e.sched = dispatch.New(dispatch.Config{
		MaxRuns:    cfg.MaxConcurrentRuns,
		MaxWaiting: cfg.MaxQueuedRuns,
		Backends:   limits,
		Now:        e.now,
		Jitter:     sm.jitter,
		Wait:       sm.wait,
	})
	return e, nil
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// plan is a resolved, rendered run: everything execution needs.
type plan struct {
	prompt   *promptRuntime // nil for ad-hoc text and messages
	profile  Profile
	backend  *backendRuntime // nil when an injected client runs without backends, or for a group
	group    []member        // a model group's backends; nil when one backend runs it
	request  GenerateRequest
	validate bool
	// output checks the answer: the prompt's or the request's output
	// schema, or objectSchema for JSONObject; nil when there is nothing to
	// check. schema is its JSON for the repair message (nil for
	// JSONObject), and subject names what is run in errors.
	output  *compiledSchema
	schema  json.RawMessage
	subject string
	info    PreparedRun
	// price is the requested model's price; nil when it has none.
	price   *Price
	retries uint64
	noWait  bool
	// waitDeadline is RunRequest.WaitDeadline.
	waitDeadline time.Time
	// observer is the run's observer; a prepared plan retains it until
	// claimed or discarded.
	observer ExecutionObserver
	// onDelta is RunRequest.OnDelta: nil for calls that do not stream.
	onDelta func(StreamDelta)
	// beforeCall is RunRequest.BeforeCall.
	beforeCall BeforeCallFunc
}

func (p *plan) identity() observe.Identity {
	return observe.Identity{
		PromptID:      p.info.PromptID,
		PromptVersion: p.info.PromptVersion,
		ProfileID:     p.info.ProfileID,
		BackendID:     p.info.BackendID,
		Model:         p.request.Model,
		Price:         p.price,
	}
}

func (e *Engine) resolve(req RunRequest) (*plan, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil engine", ErrInvalidConfig)
	}
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	retries := e.retryBudget(req.TransientRetries)
	profile, model, backendID, group, err := e.target(req.ProfileID, req.Model, req.Backend)
	if err != nil {
		return nil, err
	}
	p := &plan{profile: profile, group: group, validate: profile.Validate == nil || *profile.Validate, retries: retries, noWait: req.NoWaitPastDeadline, waitDeadline: req.WaitDeadline, subject: "ad-hoc request", onDelta: req.OnDelta,
		beforeCall: req.BeforeCall}
	if backendID != "" {
		p.backend = e.backends[backendID]
	}
	var msgs []Message
	if profile.System != "" {
		msgs = append(msgs, Message{Role: RoleSystem, Content: profile.System})
	}
	msgs = append(msgs, req.History...)
	switch {
	case req.PromptID != "":
		pr, ok := e.prompts[req.PromptID]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrPromptNotFound, req.PromptID)
		}
		if pr.output != nil && req.JSONObject {
			return nil, fmt.Errorf("%w: JSONObject does not apply to prompt %q, which has an output schema", ErrInvalidRequest, pr.ID)
		}
		p.prompt = pr
		p.subject = fmt.Sprintf("prompt %q", pr.ID)
		if pr.output != nil {
			p.output, p.schema = pr.output, pr.OutputSchema
		}
		user, err := pr.render(req.Inputs)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, Message{Role: RoleUser, Content: user})
	case req.Text != "":
		msgs = append(msgs, Message{Role: RoleUser, Content: req.Text})
	default:
		msgs = append(msgs, req.Messages...)
	}
	schemaName := ""
	if len(req.OutputSchema) > 0 {
		out, err := compileRequestSchema(req.OutputSchema)
		if err != nil {
			return nil, err
		}
		p.output, p.schema = out, bytes.Clone(req.OutputSchema)
		schemaName = cmp.Or(req.OutputSchemaName, "output")
	} else if p.prompt != nil {
		schemaName = schemaNameOf(p.prompt.ID)
	}
	if req.JSONObject {
		p.output = objectSchema
	}
	p.request = GenerateRequest{
		BackendID: backendID,
		Model:     model,
		Messages:  msgs,
		Sampling:  req.Sampling.Or(profile.Sampling),
		ToolUse:   req.ToolUse,
	}
	if profile.StructuredOutput == nil || *profile.StructuredOutput {
		p.request.ResponseFormat = req.ResponseFormat
		switch {
		case req.JSONObject:
			p.request.JSONObject = true
		case len(p.schema) > 0:
			p.request.OutputSchema = p.schema
			p.request.OutputSchemaName = schemaName
		}
	}
	// The request's slices and pointers may be the caller's: the plan
	// keeps its own copy.
	p.request = cloneRequest(p.request)
	p.info = PreparedRun{
		ProfileID:  profile.ID,
		BackendID:  backendID,
		PromptHash: hashRequest(p.request),
		Request:    cloneRequest(p.request),
	}
	if p.prompt != nil {
		p.info.PromptID, p.info.PromptVersion = p.prompt.ID, p.prompt.Version
	}
	p.price = e.prices[model]
	return p, nil
}

// retryBudget is a request's transient retry budget: its own (checked
// non-negative), else the engine's.
func (e *Engine) retryBudget(own *int) uint64 {
	if own != nil {
		return uint64(*own)
	}
	return e.retries
}

// member is one backend of a model group as a run uses it: the model sent
// there, and its part in the choice (dispatch.Route).
type member struct {
	backend  string
	model    string
	weight   int
	fallback bool
}

// target is what a request's ProfileID, Model and Backend select: the
// profile, the model it runs with and the backend that serves it, or,
// for a model group not pinned to one of its backends, the group. Run
// and Embed resolve alike through it.
//
// In a group each backend is sent its own name of the profile's model;
// a request naming another model sends that one to every backend. A
// backend pinned by the request runs alone, with its group name of the
// model when it has one.
func (e *Engine) target(profileID, model, backend string) (profile Profile, m, backendID string, group []member, err error) {
	profile, m, backendID, err = e.targetOne(profileID, model, backend)
	if err != nil || backend != "" || len(profile.Backends) == 0 {
		if err == nil && backend != "" && m == profile.Model {
			for _, b := range profile.Backends {
				if b.ID == backend {
					m = cmp.Or(b.Model, m)
				}
			}
		}
		return profile, m, backendID, nil, err
	}
	own := m == profile.Model
	for _, b := range profile.Backends {
		mb := member{backend: b.ID, model: m, weight: cmp.Or(b.Weight, 1), fallback: b.Fallback}
		if own {
			mb.model = cmp.Or(b.Model, m)
		}
		group = append(group, mb)
	}
	if len(group) == 1 {
		return profile, group[0].model, group[0].backend, nil, nil
	}
	return profile, m, "", group, nil
}

// targetOne is target before a model group is expanded.
func (e *Engine) targetOne(profileID, model, backend string) (profile Profile, m, backendID string, err error) {
	named := profileID != ""
	if !named {
		profileID = e.defaultProfile
	}
	profile, ok := e.profiles[profileID]
	switch {
	case !ok && !named:
		// Nothing was named that could be missing: the request selects no
		// profile.
		return profile, "", "", fmt.Errorf("%w: no profile selected and no default profile %q", ErrInvalidRequest, profileID)
	case !ok:
		return profile, "", "", fmt.Errorf("%w: %q", ErrProfileNotFound, profileID)
	}
	m = cmp.Or(model, profile.Model)
	backendID = profile.Backend
	if backend != "" {
		if !e.serves(backend, m) {
			return profile, "", "", fmt.Errorf("%w: backend %q does not serve model %q (no profile uses it with that model)", ErrInvalidRequest, backend, m)
		}
		backendID = backend
	}
	return profile, m, backendID, nil
}

// checkRequest checks what a request asks for on its own, before any
// lookup. Messages name fields and indexes, never values.
func checkRequest(req RunRequest) error {
	set := 0
	for _, b := range []bool{req.PromptID != "", req.Text != "", len(req.Messages) > 0} {
		if b {
			set++
		}
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
	switch {
	case set != 1:
		return bad("set exactly one of PromptID, Text and Messages")
	case req.PromptID == "" && len(req.Inputs) > 0:
		return bad("Inputs apply only to PromptID")
	case len(req.Messages) > 0 && len(req.History) > 0:
		return bad("History does not apply to Messages, which hold the whole conversation")
	case req.TransientRetries != nil && *req.TransientRetries < 0:
		return bad("TransientRetries must not be negative")
	case req.PromptID != "" && len(req.OutputSchema) > 0:
		return bad("OutputSchema applies only to Text and Messages; a named prompt has its own")
	case req.OutputSchemaName != "" && len(req.OutputSchema) == 0:
		return bad("OutputSchemaName needs OutputSchema")
	case req.OutputSchemaName != "" && !schemaNamePattern.MatchString(req.OutputSchemaName):
		return bad("OutputSchemaName must match %s", schemaNamePattern)
	case req.JSONObject && len(req.OutputSchema) > 0:
		return bad("JSONObject and OutputSchema exclude each other")
	case req.Temperature != nil && !(*req.Temperature >= 0 && *req.Temperature <= 2):
		return bad("Temperature must be between 0 and 2")
	case req.TopP != nil && !(*req.TopP >= 0 && *req.TopP <= 1):
		return bad("TopP must be between 0 and 1")
	case req.MaxTokens != nil && *req.MaxTokens <= 0:
		return bad("MaxTokens must be positive")
	case len(req.ResponseFormat) > 0 && !pktype.IsObject(req.ResponseFormat):
		return bad("ResponseFormat must be a JSON object")
	}
	if err := pktype.CheckParams(req.Extra, "Extra."); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	for _, f := range []struct {
		name string
		msgs []Message
	}{{"History", req.History}, {"Messages", req.Messages}} {
		if err := pktype.CheckMessages(f.msgs); err != nil {
			return fmt.Errorf("%w: %s%s", ErrInvalidRequest, f.name, strings.TrimPrefix(err.Error(), "messages"))
		}
	}
	if err := req.ToolUse.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// schemaNamePattern is what OpenAI's response_format accepts as a name.
var schemaNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// objectSchema checks JSONObject outputs: any JSON object.
var objectSchema = func() *compiledSchema {
	s, err := compileSchema("promptkit:///json_object.json", json.RawMessage(`{"type":"object"}`))
	if err != nil {
		panic(err)
	}
	return s
}()

// compileRequestSchema compiles a request's ad-hoc output schema. The
// schema is part of the request, so errors say what is wrong without
// quoting any of it.
func compileRequestSchema(raw json.RawMessage) (*compiledSchema, error) {
	if !pktype.IsObject(raw) {
		return nil, fmt.Errorf("%w: OutputSchema is not a JSON object", ErrInvalidRequest)
	}
	s, err := compileSchema("promptkit:///request/output.json", raw)
	if isSchemaLimit(err) {
		return nil, fmt.Errorf("%w: OutputSchema %w", ErrInvalidRequest, err) // names the limit only
	}
	if err != nil {
		return nil, fmt.Errorf("%w: OutputSchema is not a valid JSON Schema, or refers outside itself", ErrInvalidRequest)
	}
	return s, nil
}

// serves reports whether some profile runs model on backend: as its
// backend, or as a backend of its model group, by the profile's model or
// the group's name for it there.
func (e *Engine) serves(backend, model string) bool {
	for _, p := range e.profiles {
		if p.Backend == backend && p.Model == model {
			return true
		}
		for _, b := range p.Backends {
			if b.ID == backend && (model == p.Model || model == b.Model) {
				return true
			}
		}
	}
	return false
}

// render validates inputs and executes the template. Errors name the
// prompt, input locations, schema keywords and template keys, never input
// values or rendered text.
func (pr *promptRuntime) render(inputs map[string]any) (string, error) {
	data := inputs
	if data == nil {
		data = map[string]any{}
	}
	if pr.input != nil {
		problems, err := pr.input.validateValue(data)
		if err != nil {
			return "", &renderError{fmt.Sprintf("prompt %q: inputs cannot be encoded as JSON", pr.ID)}
		}
		if len(problems) > 0 {
			return "", &renderError{fmt.Sprintf("prompt %q: inputs fail the input schema: %s", pr.ID, strings.Join(problems, "; "))}
		}
	}
	var b strings.Builder
	if err := pr.tmpl.Execute(&b, data); err != nil {
		return "", &renderError{fmt.Sprintf("prompt %q: %s", pr.ID, templateProblem(err))}
	}
	return b.String(), nil
}

var (
	templatePos      = regexp.MustCompile(`^template: [^:]*:(\d+):(\d+): `)
	templateNoKey    = regexp.MustCompile(`map has no entry for key "([^"]*)"$`)
	templateBadField = regexp.MustCompile(`can't evaluate field (\w+) in type (.+)$`)
	templateNilField = regexp.MustCompile(`nil pointer evaluating .*\.(\w+)$`)
)

// templateProblem says where and why a template failed to execute. The
// error text of text/template can print input values ("if/with can't use
// VALUE"), so only its position, a missing key's name and a field's name
// and type are kept.
func templateProblem(err error) string {
	msg := err.Error()
	where := "the template"
	if m := templatePos.FindStringSubmatch(msg); m != nil {
		where = fmt.Sprintf("the template, line %s column %s,", m[1], m[2])
	}
	if m := templateNoKey.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s uses the key %q, which the inputs do not have", where, m[1])
	}
	if m := templateBadField.FindStringSubmatch(msg); m != nil {
		if m[2] == "interface {}" {
			return fmt.Sprintf("%s reads the key %q from an input value that is not an object", where, m[1])
		}
		return fmt.Sprintf("%s reads the field %q from an input value of type %s, which has no such field", where, m[1], m[2])
	}
	if m := templateNilField.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s reads the key %q from an input value that is null", where, m[1])
	}
	return where + " cannot be executed with these inputs: a value has another type or shape than the template expects"
}

func schemaNameOf(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// hashRequest hashes what reaches the provider. Its canonical form is
// fixed here, apart from the request's own JSON tags, so that equal
// requests keep equal hashes across releases.
func hashRequest(r GenerateRequest) string {
	type message struct {
		Role, Content string
		// Added later, so only when set (see canon).
		ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
		ToolCallID string          `json:"tool_call_id,omitempty"`
		Parts      json.RawMessage `json:"parts,omitempty"`
		Extra      pktype.Params   `json:"extra,omitempty"`
	}
	msgs := make([]message, len(r.Messages))
	for i, m := range r.Messages {
		msgs[i] = message{m.Role, m.Content, m.ToolCalls, m.ToolCallID, m.Parts, m.Extra}
	}
	canon := struct {
		Model       string          `json:"model"`
		Messages    []message       `json:"messages"`
		Temperature *float64        `json:"temperature"`
		TopP        *float64        `json:"top_p"`
		MaxTokens   *int            `json:"max_tokens"`
		Stop        []string        `json:"stop"`
		Schema      json.RawMessage `json:"schema"`
		// Keys added later appear only when set, so that the requests
		// that existed before them keep their hashes.
		Seed       *int64 `json:"seed,omitempty"`
		JSONObject bool   `json:"json_object,omitempty"`
		ToolUse
		ResponseFormat json.RawMessage `json:"response_format,omitempty"`
		Extra          pktype.Params   `json:"extra,omitempty"`
	}{r.Model, msgs, r.Temperature, r.TopP, r.MaxTokens, r.Stop, r.OutputSchema, r.Seed, r.JSONObject, r.ToolUse,
		r.ResponseFormat, r.Extra}
	b, _ := json.Marshal(canon) // cannot fail: plain values only
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// cloneRequest returns a deep copy, so that what a caller or an injected
// client receives cannot change the engine's request.
func cloneRequest(r GenerateRequest) GenerateRequest {
	r.Messages = append([]Message(nil), r.Messages...)
	for i, m := range r.Messages {
		r.Messages[i].ToolCalls = slices.Clone(m.ToolCalls)
		r.Messages[i].Parts = bytes.Clone(m.Parts)
		r.Messages[i].Extra = m.Extra.Clone()
	}
	r.Sampling = r.Sampling.Clone()
	r.OutputSchema = bytes.Clone(r.OutputSchema)
	r.ResponseFormat = bytes.Clone(r.ResponseFormat)
	r.ToolUse = r.ToolUse.Clone()
	return r
}

// Profile returns a copy of the profile id, and whether the engine has
// it: what a request naming it runs with (its model, for example).
func (e *Engine) Profile(id string) (Profile, bool) {
	p, ok := e.profiles[id]
	if !ok {
		return Profile{}, false
	}
	return p.clone(), true
}

// Profiles returns the ids of the engine's profiles, sorted: the values
// RunRequest.ProfileID accepts. The result is a new slice each call.
func (e *Engine) Profiles() []string {
	return slices.Sorted(maps.Keys(e.profiles))
}

// ResolveModel says what a request naming model (an OpenAI-style model
// name) runs with: a profile id names that profile, with the profile's
// own model (backendModel ""); otherwise a model some profile uses runs on
// that profile (the first such by id) with that model. ok is false for a
// name that is neither.
func (e *Engine) ResolveModel(model string) (profile, backendModel string, ok bool) {
	if e == nil || model == "" {
		return "", "", false
	}
	if _, ok := e.profiles[model]; ok {
		return model, "", true
	}
	for _, id := range e.Profiles() {
		if e.profiles[id].Model == model {
			return id, model, true
		}
	}
	return "", "", false
}

// Models lists what ResolveModel accepts: every profile id and every
// model some profile uses, sorted, each once.
func (e *Engine) Models() []string {
	if e == nil {
		return []string{}
	}
	var out []string
	for id, p := range e.profiles {
		out = append(out, id)
		if p.Model != "" {
			out = append(out, p.Model)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// begin starts a call's recording (its started event); an error is the
// call's, already recorded as its end.
func (e *Engine) begin(obs ExecutionObserver) (*observe.Recorder, error) {
	now, newID := time.Now, observe.NewRunID
	if e != nil {
		now, newID = e.now, e.newID
	}
	rec := observe.New(now, newID, obs)
	rec.Begin()
	if rec.RunID() == "" {
		return rec, finish(rec, nil, errNoRunID)
	}
	return rec, nil
}

// Run renders and executes req: admission, generation with transient
// retries, output validation and repair. It returns an error only when no
// result could be produced; there are no partial results.
func (e *Engine) Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	rec, err := e.begin(req.Observer)
	if err != nil {
		return nil, err
	}
	p, err := e.resolve(req)
	if err != nil {
		return nil, finish(rec, nil, err)
	}
	rec.SetIdentity(p.identity())
	res, err := e.execute(ctx, p, rec)
	return res, finish(rec, res, err)
}

// errNoRunID ends a run whose ID could not be made: a run without an
// identity could not be told apart from others in its events.
var errNoRunID = errors.New("promptkit: cannot make a run ID")

// finish emits the finished event after execution released everything,
// and returns err. It is not deferred: no callback runs during a panic.
// res is nil for a call without output to validate (Embed).
func finish(rec *observe.Recorder, res *RunResult, err error) error {
	switch {
	case err != nil:
		rec.Finish(ExecutionOutcomeError, pktype.Classify(err), errors.Is(err, ErrRetriesExhausted))
	case res != nil && res.Validation.Status == ValidationInvalid:
		rec.Finish(ExecutionOutcomeInvalidOutput, ExecutionFailureNone, false)
	default:
		rec.Finish(ExecutionOutcomeSuccess, ExecutionFailureNone, false)
	}
	return err
}

// Prepare renders req without executing it: useful to inspect the request
// or compute its PromptHash. It performs no I/O.
func (e *Engine) Prepare(ctx context.Context, req RunRequest) (*PreparedRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := e.resolve(req)
	if err != nil {
		return nil, err
	}
	info := p.info
	return &info, nil
}

// PreparedExecution is a single-use handle to a rendered run, made by
// PrepareExecution and consumed by RunPrepared or Discard. Its zero value
// is not usable.
type PreparedExecution struct {
	mu      sync.Mutex
	engine  *Engine
	info    PreparedRun
	payload *plan // nil once claimed or discarded
}

// Info describes the prepared run.
func (h *PreparedExecution) Info() PreparedRun {
	if h == nil {
		return PreparedRun{}
	}
	return h.info
}

// PrepareExecution renders req and returns a handle that RunPrepared
// executes exactly once. Rendering errors are returned here, so a caller
// can reject bad requests before committing to run them.
func (e *Engine) PrepareExecution(ctx context.Context, req RunRequest) (*PreparedExecution, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := e.resolve(req)
	if err != nil {
		return nil, err
	}
	p.observer = req.Observer
	return &PreparedExecution{engine: e, info: p.info, payload: p}, nil
}

// RunPrepared executes a handle from this engine's PrepareExecution, with
// the retry budget and observer frozen at preparation. The claim is
// atomic: of many concurrent calls with one handle exactly one executes
// and observes; the others, and any call with a nil, foreign, used or
// discarded handle, fail with ErrInvalidRequest and emit no events.
func (e *Engine) RunPrepared(ctx context.Context, h *PreparedExecution) (*RunResult, error) {
	p, err := e.claim(h)
	if err != nil {
		return nil, err
	}
	rec := observe.New(e.now, e.newID, p.observer)
	p.observer = nil // the recorder owns it now
	rec.SetIdentity(p.identity())
	rec.Begin()
	if rec.RunID() == "" {
		return nil, finish(rec, nil, errNoRunID)
	}
	res, err := e.execute(ctx, p, rec)
	return res, finish(rec, res, err)
}

func (e *Engine) claim(h *PreparedExecution) (*plan, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil engine", ErrInvalidConfig)
	}
	p, err := h.take(e)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: prepared execution already used or discarded", ErrInvalidRequest)
	}
	return p, nil
}

// Discard releases an unexecuted handle. Discarding a used or discarded
// handle does nothing; a nil or foreign handle is ErrInvalidRequest.
func (e *Engine) Discard(h *PreparedExecution) error {
	_, err := h.take(e)
	return err
}

// take atomically removes and returns the payload (nil when already taken)
// if the handle belongs to e.
func (h *PreparedExecution) take(e *Engine) (*plan, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil prepared execution", ErrInvalidRequest)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.engine != e {
		return nil, fmt.Errorf("%w: prepared execution belongs to another engine", ErrInvalidRequest)
	}
	p := h.payload
	h.payload = nil
	return p, nil
}

// execute runs a resolved plan under admission.
func (e *Engine) execute(ctx context.Context, p *plan, rec *observe.Recorder) (*RunResult, error) {
	release, admissionWait, err := e.sched.Admit(ctx)
	if err != nil {
		return nil, err
	}
	defer release()

	res := &RunResult{
		RunID:         rec.RunID(),
		PromptID:      p.info.PromptID,
		PromptVersion: p.info.PromptVersion,
		ProfileID:     p.info.ProfileID,
		BackendID:     p.info.BackendID,
		Model:         p.request.Model,
		PromptHash:    p.info.PromptHash,
	}
	req := p.request
	for gen := uint64(1); ; gen++ {
		resp, answered, err := e.generate(ctx, p, req, gen, rec)
		if err != nil {
			return nil, err
		}
		if answered.backend != "" {
			res.BackendID, res.Model = answered.backend, answered.model
		}
		res.Text = resp.Text
		res.Reasoning = resp.Reasoning
		res.ToolCalls = resp.ToolCalls
		res.FinishReason = resp.FinishReason
		res.Choices = resp.Choices
		res.Raw = resp.Raw
		res.Truncated = truncated(resp.FinishReason)
		if resp.Model != "" {
			res.Model = resp.Model
		}
		// Calls are not the answer yet: the answer comes after their
		// results, and that one is checked.
		if !p.validate || p.output == nil || len(resp.ToolCalls) > 0 {
			res.Validation = Validation{Status: ValidationSkipped}
			break
		}
		// Every choice is checked (a request's n asks for several); the
		// first that fails is repaired, and the repair asks for them all
		// again.
		bad, diags := pktype.Choice{}, []string(nil)
		choices := resp.AllChoices()
		for i, c := range choices {
			if len(c.ToolCalls) > 0 {
				continue
			}
			doc, d, err := e.validate(p.output, c.Text)
			if err != nil {
				return nil, &opError{op: p.subject + ": validate output", cause: fmt.Errorf("%w: %w", ErrValidation, err)}
			}
			if i == 0 {
				res.Output = doc
			}
			if len(d) > 0 {
				bad, diags = c, d
				if len(choices) > 1 {
					for j := range diags {
						diags[j] = fmt.Sprintf("choice %d: %s", c.Index, diags[j])
					}
				}
				break
			}
		}
		if len(diags) == 0 {
			res.Validation = Validation{Status: ValidationValid}
			break
		}
		res.Output = nil
		repairsLeft := gen <= uint64(p.profile.RepairBudget)
		if truncated(bad.FinishReason) {
			// A repair is sent with the same max_tokens: an answer that
			// did not fit would be cut off again.
			res.Truncated = true
			res.Validation = Validation{Status: ValidationInvalid, Errors: append(truncationNotes(p, bad.FinishReason, repairsLeft), diags...)}
			break
		}
		res.Validation = Validation{Status: ValidationInvalid, Errors: diags}
		if !repairsLeft {
			break
		}
		req = repairRequest(p, bad.Text, diags)
	}
	t := rec.Totals()
	res.Usage = Usage{TokenUsage: t.Usage, Known: rec.ObservedUsage().Usage().Known}
	res.Cost = t.Cost
	res.Attempts = int(t.Attempts)
	res.RepairCalls = int(t.RepairCalls)
	res.Timings = Timings{
		Admission:    admissionWait,
		CapacityWait: t.CapacityWait,
		Generation:   t.Generation,
		Total:        e.now().Sub(rec.Start()),
	}
	return res, nil
}

// truncationNotes lead the diagnostics of an output that the token limit
// cut off.
func truncationNotes(p *plan, finishReason string, repairsLeft bool) []string {
	limit := "the provider's default token limit (the profile sets no max_tokens)"
	if n := p.request.OutputLimit(); n != nil {
		limit = fmt.Sprintf("max_tokens %d", *n)
	}
	notes := []string{fmt.Sprintf("output was cut off at %s (finish_reason %q); raise the profile's max_tokens", limit, finishReason)}
	if repairsLeft {
		notes = append(notes, "not repaired: a repair has the same max_tokens and would be cut off too")
	}
	return notes
}

// repairRequest shows the model its invalid output and the validator's
// diagnostics, on top of the original conversation (not the previous
// repair), so the request size stays bounded.
func repairRequest(p *plan, invalid string, diags []string) GenerateRequest {
	r := p.request
	var b strings.Builder
	if len(p.schema) == 0 {
		b.WriteString("Your previous reply is not a JSON object:\n")
	} else {
		b.WriteString("Your previous reply does not satisfy the required JSON Schema:\n")
	}
	for _, d := range diags {
		b.WriteString("- ")
		b.WriteString(d)
		b.WriteString("\n")
	}
	if len(p.schema) == 0 {
		b.WriteString("Reply again with only a JSON object, and nothing else.")
	} else {
		b.WriteString("Reply again with only a JSON value that satisfies this schema, and nothing else:\n")
		b.Write(p.schema)
	}
	msgs := make([]Message, 0, len(r.Messages)+2)
	msgs = append(msgs, r.Messages...)
	msgs = append(msgs,
		Message{Role: RoleAssistant, Content: invalid},
		Message{Role: RoleUser, Content: b.String()})
	r.Messages = msgs
	return r
}

// generate runs one generation sequence and maps its failure to the public
// error contract. answered is the backend that answered, and the model
// sent there.
func (e *Engine) generate(ctx context.Context, p *plan, req GenerateRequest, gen uint64, rec *observe.Recorder) (resp *GenerateResponse, answered member, err error) {
	est := callEstimate(req, p.price)
	seq := dispatch.Sequence{Backend: req.BackendID, Generation: gen, Tokens: est.Tokens, NoWaitPastDeadline: p.noWait,
		WaitDeadline: p.waitDeadline, Recorder: rec,
		Before: before(p.beforeCall, est)}
	if e.client == nil {
		seq.Retries = p.retries // injected clients own their retries
	}
	if len(p.group) == 0 {
		if seq.Attempt, err = e.generation(p, p.backend, req, gen); err != nil {
			return nil, member{}, err
		}
	} else {
		models := map[string]string{}
		seq.Group = "profile:" + p.profile.ID
		for _, m := range p.group {
			r := req
			r.BackendID, r.Model = m.backend, m.model
			models[m.backend] = m.model
			attempt, err := e.generation(p, e.backends[m.backend], r, gen)
			if err != nil {
				return nil, member{}, err
			}
			seq.Routes = append(seq.Routes, dispatch.Route{Backend: m.backend, Weight: m.weight, Fallback: m.fallback, Attempt: attempt})
		}
		defer func() { answered.model = models[answered.backend] }()
	}
	out := e.sched.Generate(ctx, seq)
	if out.Err != nil {
		return nil, member{}, &opError{op: fmt.Sprintf("profile %q: generation %d", p.profile.ID, gen), cause: out.Err}
	}
	return out.Response, member{backend: out.Backend, model: req.Model}, nil
}

// generation prepares req's attempt on backend b (nil with an injected
// client).
func (e *Engine) generation(p *plan, b *backendRuntime, req GenerateRequest, gen uint64) (func(context.Context) llm.Outcome, error) {
	if e.client != nil {
		frozen := cloneRequest(req)
		return func(ctx context.Context) llm.Outcome { return e.callInjected(ctx, cloneRequest(frozen)) }, nil
	}
	prepare := openai.Prepare
	if p.onDelta != nil {
		prepare = openai.PrepareStream
	}
	frozen, err := prepare(b.endpoint, req)
	if err != nil {
		// A missing credential or an unencodable request: the request
		// cannot be sent as configured.
		return nil, &opError{op: fmt.Sprintf("backend %q", b.ID), cause: err}
	}
	if p.onDelta != nil {
		return streamAttempts(frozen, gen, p.onDelta), nil
	}
	return frozen.Execute, nil
}

// callInjected performs one attempt with the injected client.
func (e *Engine) callInjected(ctx context.Context, req GenerateRequest) llm.Outcome {
	resp, err := e.client.Generate(ctx, req)
	if err != nil {
		return llm.Outcome{Err: &injectedError{cause: err}}
	}
	if resp == nil {
		return llm.Outcome{Err: &llm.AttemptError{Kind: ErrMalformedResponse, Cause: errors.New("injected client returned a nil response")}}
	}
	return llm.Outcome{Response: resp, Usage: resp.Usage, Presence: resp.Presence()}
}
