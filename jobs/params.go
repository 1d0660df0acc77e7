package jobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// The rules every store applies to its parameters live here, once: the
// stores call Normalize first and then only move rows. Each Normalize
// fills the documented defaults and returns an error matching ErrInvalid
// that names the parameter.

// Defaults and bounds.
const (
	DefaultPriority    = 50
	MinPriority        = 0
	MaxPriority        = 100
	DefaultMaxAttempts = 3
	// MaxMaxAttempts bounds max_attempts wherever a caller sets it (the
	// API, the front door's header, a batch, a file line).
	MaxMaxAttempts = 25
	// MaxDepth bounds execution_options.depth, the thread history sent.
	MaxDepth         = 1000
	DefaultListLimit = 50
	MaxListLimit     = 1000
	DefaultPageLimit = 500 // ChangesSince and EventsAfter
	// ArchiveBatch is how many jobs one Archive transaction examines, so
	// archiving a large backlog never holds writers up for long.
	ArchiveBatch = 1000
	// DefaultReclaimAfter and DefaultStuckAfter are the reclaim
	// thresholds.
	DefaultReclaimAfter = defaultReclaim
	DefaultStuckAfter   = defaultStuckAfter
	// MaxErrorMessage bounds a stored error message, in bytes.
	MaxErrorMessage = maxErrorMessage
)

// InvalidError is the error of a parameter check; it matches ErrInvalid.
// Field names the parameter as callers spell it ("" when the rule spans
// several, and Reason names them); neither repeats the value, so Message
// may be shown to the caller as it is.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return ErrInvalid.Error() + ": " + e.Message() }

// Message is the error without the package prefix: "field: reason".
func (e *InvalidError) Message() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Is makes every InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// InvalidMessage is what a caller is told of an error matching ErrInvalid
// or pktype.ErrInvalidRequest: the rule's own words ("max_attempts: must
// be from 1 to 25"), without the packages the error passed through
// ("sqlitestore: enqueue: jobs: invalid parameters: "). These errors name
// fields and ids, never text or bodies.
func InvalidMessage(err error) string {
	if ie, ok := errors.AsType[*InvalidError](err); ok {
		return ie.Message()
	}
	msg := err.Error()
	for _, sentinel := range []error{pktype.ErrInvalidRequest, ErrInvalid} {
		if _, rest, ok := strings.Cut(msg, sentinel.Error()+": "); ok && errors.Is(err, sentinel) {
			return rest
		}
	}
	return msg
}

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

func invalidField(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// NUL characters are refused in everything a caller sends, on every store
// alike: PostgreSQL cannot store one in text, and one that reached a
// provider would come back in its answer. Text a provider returns has
// them replaced instead (SanitizeText), so an answer is never lost to one.

const msgNUL = "contains a NUL character"

// checkText refuses a NUL in a caller's string field.
func checkText(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return invalidField(field, msgNUL)
	}
	return nil
}

// checkJSONText refuses a NUL in a caller's JSON value: a \u0000 escape in
// any string or key (a raw NUL byte is not JSON at all).
func checkJSONText(field string, raw []byte) error {
	if jsonNUL(raw) >= 0 {
		return invalidField(field, msgNUL)
	}
	return nil
}

// checkParamsText refuses a NUL in any of p's names or values; the
// field is prefix and the name.
func checkParamsText(prefix string, p pktype.Params) error {
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if err := checkJSONText(prefix+k, append([]byte(k), p[k]...)); err != nil {
			return err
		}
	}
	return nil
}

// jsonNUL is the offset of the first NUL in raw JSON (a raw byte or a
// \u0000 escape), or -1. An escaped backslash is skipped whole, so
// "\\u0000" (a backslash, then "u0000") is not a NUL.
func jsonNUL(raw []byte) int {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case 0:
			return i
		case '\\':
			if i+6 <= len(raw) && string(raw[i+1:i+6]) == "u0000" {
				return i
			}
			i++
		}
	}
	return -1
}

// SanitizeText makes text a provider returned storable on every store:
// NUL characters and invalid UTF-8 become U+FFFD.
func SanitizeText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// sanitizeJSON is SanitizeText for JSON a provider returned: each \u0000
// escape becomes \ufffd. raw must be valid JSON (so holds no raw NUL).
func sanitizeJSON(raw json.RawMessage) json.RawMessage {
	i := jsonNUL(raw)
	if i < 0 {
		return raw
	}
	out := make(json.RawMessage, 0, len(raw))
	for i >= 0 {
		out = append(append(out, raw[:i]...), `\ufffd`...)
		raw = raw[i+6:]
		i = jsonNUL(raw)
	}
	return append(out, raw...)
}

// CheckMaxAttempts is the one bound on max_attempts: 1 to MaxMaxAttempts.
func CheckMaxAttempts(n int) error {
	if n < 1 || n > MaxMaxAttempts {
		return invalidField("max_attempts", "must be from 1 to %d", MaxMaxAttempts)
	}
	return nil
}

func checkPriority(p int) error {
	if p < MinPriority || p > MaxPriority {
		return invalid("priority %d is outside %d–%d", p, MinPriority, MaxPriority)
	}
	return nil
}

// Normalize checks p and fills its defaults: priority 50, three attempts,
// and AvailableAt at microsecond precision. Exactly one of Text (not
// blank), PromptRef, Chat (see ChatRequest.Normalize) and Embedding (see
// EmbeddingRequest.Normalize) must be set; Inputs go with PromptRef and
// must be a JSON object; BatchID and CustomID go together; ExecutionOptions.Depth is 0 to MaxDepth;
// KeyExpires needs an IdempotencyKey, and KeyGrace goes with KeyExpires
// and is not negative.
//
// A submission is normalized once, where it is made (Submission.Params,
// the front door, a batch line, the CLI), and checked with that
// (CheckFunc) before it is stored. The store normalizes again to defend
// itself, but the params Normalize returns are marked: their repeat skips
// Inputs (and the chat skips itself, see ChatRequest.Normalize), the
// parts whose checks cost in proportion to their size, and re-checks the
// small fields, such as the org, user and idempotency key a submitter
// sets after normalizing. So change Inputs or Chat only on params that
// are normalized again from scratch.
func (p EnqueueParams) Normalize() (EnqueueParams, error) {
	set := 0
	for _, ok := range []bool{p.PromptRef != "", p.Text != "", p.Chat != nil, p.Embedding != nil} {
		if ok {
			set++
		}
	}
	switch {
	case set == 0 || p.Chat == nil && p.Embedding == nil && p.PromptRef == "" && strings.TrimSpace(p.Text) == "":
		return p, invalid("set text or prompt_ref")
	case set > 1:
		return p, invalid("set one of text, prompt_ref, chat and embedding")
	case p.PromptRef == "" && len(p.Inputs) > 0:
		return p, invalid("inputs go with prompt_ref, not text")
	case (p.BatchID == "") != (p.CustomID == ""):
		return p, invalid("batch_id and custom_id go together")
	case p.KeyExpires && p.IdempotencyKey == "":
		return p, invalid("an expiring key needs an idempotency key")
	case p.KeyGrace < 0 || p.KeyGrace > 0 && !p.KeyExpires:
		return p, invalid("key grace must be zero or more, with an expiring key")
	case p.KeyFresh && !p.KeyExpires:
		return p, invalid("a fresh key must be an expiring key")
	case p.ClaimAs != "" && (p.DependsOn != "" || !p.AvailableAt.IsZero()):
		return p, invalid("a job claimed as it is stored has no dependency and no later start")
	}
	for _, f := range []struct{ name, v string }{
		{"text", p.Text}, {"prompt", p.PromptRef}, {"profile", p.Profile}, {"parent_id", p.ParentID},
		{"depends_on", p.DependsOn}, {"batch_id", p.BatchID}, {"custom_id", p.CustomID},
		{"correlation_id", p.CorrelationID}, {"idempotency_key", p.IdempotencyKey}, {"claim_as", p.ClaimAs},
	} {
		if err := checkText(f.name, f.v); err != nil {
			return p, err
		}
	}
	if !p.normalized {
		if err := checkJSONText("inputs", p.Inputs); err != nil {
			return p, err
		}
	}
	for _, v := range []string{p.ExecutionOptions.Model, p.ExecutionOptions.PreferProvider} {
		if err := checkText("execution_options", v); err != nil {
			return p, err
		}
	}
	if p.Chat != nil {
		c, err := p.Chat.Normalize()
		if err != nil {
			return p, err
		}
		p.Chat = &c
	}
	if p.Embedding != nil {
		e, err := p.Embedding.Normalize()
		if err != nil {
			return p, err
		}
		p.Embedding = &e
	}
	if len(p.Inputs) > 0 && !p.normalized {
		if !pktype.IsObject(p.Inputs) {
			return p, invalid("inputs are not a JSON object")
		}
	}
	prio := DefaultPriority
	if p.Priority != nil {
		prio = *p.Priority
	}
	if err := checkPriority(prio); err != nil {
		return p, err
	}
	p.Priority = &prio
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if err := CheckMaxAttempts(p.MaxAttempts); err != nil {
		return p, err
	}
	if err := p.ExecutionOptions.checkDepth(); err != nil {
		return p, err
	}
	if !p.AvailableAt.IsZero() {
		p.AvailableAt = p.AvailableAt.UTC().Truncate(time.Microsecond)
	}
	p.normalized = true
	return p, nil
}

// Normalize checks p and fills its defaults: Limit 1, PriorityCeiling 100.
func (p ClaimParams) Normalize() (ClaimParams, error) {
	if p.Worker == "" {
		return p, invalid("empty worker")
	}
	if p.Limit <= 0 {
		p.Limit = 1
	}
	ceiling := MaxPriority
	if p.PriorityCeiling != nil {
		ceiling = *p.PriorityCeiling
	}
	if ceiling < MinPriority || ceiling > MaxPriority {
		return p, invalid("priority ceiling %d is outside %d–%d", ceiling, MinPriority, MaxPriority)
	}
	p.PriorityCeiling = &ceiling
	if len(p.SkipProfiles) > MaxSkipProfiles {
		return p, invalidField("skip_profiles", "%d profiles, more than %d", len(p.SkipProfiles), MaxSkipProfiles)
	}
	for _, prof := range p.SkipProfiles {
		if err := checkText("skip_profiles", prof); err != nil {
			return p, err
		}
	}
	// Sorted and unique: claims with the same list can share a statement.
	p.SkipProfiles = slices.Compact(slices.Sorted(slices.Values(p.SkipProfiles)))
	return p, nil
}

// MaxSkipProfiles bounds ClaimParams.SkipProfiles.
const MaxSkipProfiles = 1000

// Normalize checks p's answer and attempt events (see Answer.Normalize).
func (p SucceedParams) Normalize() (SucceedParams, error) {
	var err error
	if p.Answer, err = p.Answer.Normalize(); err != nil {
		return p, err
	}
	p.AttemptEvents, err = normalizeAttempts(p.AttemptEvents)
	return p, err
}

// Normalize returns a as a store keeps it: its parsed output must be JSON
// and its body a JSON object (AnswerBody); the provider's text is made
// storable (SanitizeText).
func (a Answer) Normalize() (Answer, error) {
	if len(a.Parsed) > 0 && !json.Valid(a.Parsed) {
		return a, invalid("parsed output is not JSON")
	}
	a.Output, a.Model, a.FinishReason = SanitizeText(a.Output), SanitizeText(a.Model), SanitizeText(a.FinishReason)
	a.Backend = SanitizeText(a.Backend)
	if len(a.ToolCalls) > 0 {
		calls := make([]pktype.ToolCall, len(a.ToolCalls))
		for i, c := range a.ToolCalls {
			calls[i] = pktype.ToolCall{ID: SanitizeText(c.ID), Type: SanitizeText(c.Type), Function: pktype.FunctionCall{
				Name: SanitizeText(c.Function.Name), Arguments: SanitizeText(c.Function.Arguments)}}
		}
		a.ToolCalls = calls
	}
	a.Parsed = sanitizeJSON(a.Parsed)
	var err error
	a.Body, err = AnswerBody(a.Body)
	return a, err
}

// Normalize redacts and bounds the message (see ErrorMessage).
func (p RequeueParams) Normalize() (RequeueParams, error) {
	if !p.AvailableAt.IsZero() {
		p.AvailableAt = p.AvailableAt.UTC().Truncate(time.Microsecond)
	}
	p.Message = ErrorMessage(p.Message)
	var err error
	p.AttemptEvents, err = normalizeAttempts(p.AttemptEvents)
	return p, err
}

// Normalize stores an empty kind as unknown and redacts and bounds the
// message (see ErrorMessage).
func (p FailParams) Normalize() (FailParams, error) {
	if p.Kind == KindNone {
		p.Kind = KindUnknown
	}
	p.Message = ErrorMessage(p.Message)
	var err error
	p.AttemptEvents, err = normalizeAttempts(p.AttemptEvents)
	return p, err
}

// Normalize checks that an attempt's data is JSON.
func (p AttemptParams) Normalize() (AttemptParams, error) {
	if len(p.Data) > 0 && !json.Valid(p.Data) {
		return p, invalid("attempt data is not JSON")
	}
	p.Data = sanitizeJSON(p.Data) // it holds the model the provider named
	return p, nil
}

// normalizeAttempts normalizes the attempt events a finishing write
// carries as AttemptParams.Normalize does one.
func normalizeAttempts(ds []json.RawMessage) ([]json.RawMessage, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	out := make([]json.RawMessage, len(ds))
	for i, d := range ds {
		if len(d) == 0 {
			return nil, invalid("attempt data is empty")
		}
		a, err := AttemptParams{Data: d}.Normalize()
		if err != nil {
			return nil, err
		}
		out[i] = a.Data
	}
	return out, nil
}

// Normalize checks an overriding priority, By and Bulk (checkActor).
func (p RetryParams) Normalize() (RetryParams, error) {
	if p.Priority != nil {
		if err := checkPriority(*p.Priority); err != nil {
			return p, err
		}
	}
	if err := checkActor("by", p.By); err != nil {
		return p, err
	}
	return p, checkActor("bulk", p.Bulk)
}

// Data returns the data of the retry's two events: the old job's
// superseded event (naming newID) and the new job's queued event.
func (p RetryParams) Data(newID string) (old, fresh json.RawMessage) {
	return TransitionData{SupersededBy: newID, By: p.By, Bulk: p.Bulk}.JSON(),
		TransitionData{Supersedes: p.JobID, By: p.By, Bulk: p.Bulk}.JSON()
}

// PriorityOf is the priority of the job that retries old: p.Priority
// when set (0 included), else old's.
func (p RetryParams) PriorityOf(old Job) int {
	if p.Priority != nil {
		return *p.Priority
	}
	return old.Priority
}

// Replacement is the job, id, that retries old at now: the one home of
// what a retry copies and what it resets. It keeps old's prompt, attempt
// budget, execution options, dependency, org, creator and token; it is
// queued at attempt 1 with PriorityOf(old), supersedes old, and is
// created, updated and available at now, with no claim, times, response
// or error. The stores insert it as it is; only its start tag (the
// queue's fair share) is theirs to add.
func (p RetryParams) Replacement(old Job, id string, now time.Time) Job {
	return Job{
		ID:               id,
		PromptID:         old.PromptID,
		State:            Queued,
		Priority:         p.PriorityOf(old),
		Attempt:          1,
		MaxAttempts:      old.MaxAttempts,
		ExecutionOptions: old.ExecutionOptions,
		Supersedes:       old.ID,
		DependsOn:        old.DependsOn,
		OrgID:            old.OrgID,
		CreatedBy:        old.CreatedBy,
		TokenID:          old.TokenID,
		CreatedAt:        now,
		UpdatedAt:        now,
		AvailableAt:      now,
	}
}

// Normalize fills the default thresholds for zero values (4 and 15
// minutes) and refuses negative ones, or a ReclaimAfter that is not below
// StuckAfter.
func (p ReclaimParams) Normalize() (ReclaimParams, error) {
	if p.ReclaimAfter < 0 || p.StuckAfter < 0 {
		return p, invalid("negative reclaim threshold")
	}
	if p.ReclaimAfter == 0 {
		p.ReclaimAfter = DefaultReclaimAfter
	}
	if p.StuckAfter == 0 {
		p.StuckAfter = DefaultStuckAfter
	}
	if p.ReclaimAfter >= p.StuckAfter {
		return p, invalid("reclaim_after %v is not below stuck_after %v", p.ReclaimAfter, p.StuckAfter)
	}
	return p, nil
}

// Normalize fills Limit (50, at most 1000) and checks the filter
// (JobFilter.Normalize) and the cursor.
func (p ListParams) Normalize() (ListParams, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultListLimit
	}
	p.Limit = min(p.Limit, MaxListLimit)
	var err error
	if p.JobFilter, err = p.JobFilter.Normalize(); err != nil {
		return p, err
	}
	if p.After != "" {
		if _, err := DecodeCursor(p.After); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Normalize checks f: a known State, priorities within 0–100 with
// MinPriority not above MaxPriority, Until not before Since, no NUL in a
// string. It moves Since and Until to UTC at microsecond precision, the
// stored one: Since down and Until up, so that neither bound lets in or
// leaves out a job the exact time would not.
func (f JobFilter) Normalize() (JobFilter, error) {
	if f.State != "" && !f.State.Valid() {
		return f, invalidField("state", "unknown state %q", f.State)
	}
	for _, c := range []struct{ field, v string }{
		{"org_id", f.OrgID}, {"created_by", f.CreatedBy}, {"profile", f.Profile},
		{"backend", f.Backend}, {"batch_id", f.BatchID},
	} {
		if err := checkText(c.field, c.v); err != nil {
			return f, err
		}
	}
	for _, pr := range []*int{f.MinPriority, f.MaxPriority} {
		if pr != nil {
			if err := checkPriority(*pr); err != nil {
				return f, err
			}
		}
	}
	if f.MinPriority != nil && f.MaxPriority != nil && *f.MinPriority > *f.MaxPriority {
		return f, invalid("min_priority %d is above max_priority %d", *f.MinPriority, *f.MaxPriority)
	}
	if !f.Since.IsZero() {
		f.Since = f.Since.UTC().Truncate(time.Microsecond)
	}
	if !f.Until.IsZero() {
		u := f.Until.UTC()
		if t := u.Truncate(time.Microsecond); t.Before(u) {
			u = t.Add(time.Microsecond)
		}
		f.Until = u
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return f, invalid("until is before since")
	}
	return f, nil
}

// MaxActor bounds CancelParams.By and Bulk (and RetryParams'), in bytes:
// they name a caller or an action, not free prose.
const MaxActor = 200

// checkActor refuses a By or Bulk that is too long or holds a NUL.
func checkActor(field, v string) error {
	if len(v) > MaxActor {
		return invalidField(field, "longer than %d bytes", MaxActor)
	}
	return checkText(field, v)
}

// Normalize checks By and Bulk (checkActor).
func (p CancelParams) Normalize() (CancelParams, error) {
	if err := checkActor("by", p.By); err != nil {
		return p, err
	}
	return p, checkActor("bulk", p.Bulk)
}

// Data is the data of the cancelled event: who asked, in which bulk
// action.
func (p CancelParams) Data() json.RawMessage {
	return TransitionData{By: p.By, Bulk: p.Bulk}.JSON()
}

// Normalize fills Limit (500) and truncates Since to microseconds.
func (p ChangesParams) Normalize() (ChangesParams, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	if !p.Since.IsZero() {
		p.Since = p.Since.UTC().Truncate(time.Microsecond)
	}
	return p, nil
}

// Normalize fills Limit (500).
func (p EventsParams) Normalize() (EventsParams, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	return p, nil
}

// Normalize truncates Since to microseconds.
func (p MetricsParams) Normalize() (MetricsParams, error) {
	if !p.Since.IsZero() {
		p.Since = p.Since.UTC().Truncate(time.Microsecond)
	}
	return p, nil
}

// Normalize checks the depth: ancestors to return, 0 or more.
func (p ThreadParams) Normalize() (ThreadParams, error) {
	if p.Depth < 0 {
		return p, invalid("thread depth %d is negative", p.Depth)
	}
	return p, nil
}

// ErrorMessage is what a store keeps of an error message: redacted like
// the engine's provider messages (printable UTF-8, credential-shaped
// tokens replaced) and cut to MaxErrorMessage bytes without splitting a
// character.
func ErrorMessage(s string) string { return pktype.Redact(s, MaxErrorMessage) }

// Cursor is a position in ListJobs' newest-first order.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// String encodes the cursor as ListJobs' opaque Next.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "/" + c.ID))
}

// CursorAfter is the cursor that continues a listing after j.
func CursorAfter(j Job) Cursor { return Cursor{CreatedAt: j.CreatedAt, ID: j.ID} }

// DecodeCursor parses what Cursor.String made; anything else matches
// ErrInvalid.
func DecodeCursor(s string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		us, id, ok := strings.Cut(string(raw), "/")
		if n, perr := strconv.ParseInt(us, 10, 64); ok && perr == nil && id != "" {
			return Cursor{CreatedAt: time.UnixMicro(n).UTC(), ID: id}, nil
		}
	}
	return Cursor{}, invalid("malformed cursor")
}

// TransitionData is the Data of a transition event: who made the change
// and why. Stores build it with JSON, so both write the same thing for the
// same transition:
//
//	→ queued (enqueue)            nothing; a retry's new job: supersedes, by, bulk
//	queued → running (claim)      worker
//	running → succeeded           nothing (the job keeps its worker_claim)
//	running → queued (requeue)    worker, error_kind, error_message, handback when handed back
//	running → failed              worker, error_kind, error_message
//	running → queued|failed       (reclaim) the lost worker, error_kind, error_message
//	→ cancelled                   by, bulk (Cancel; CancelBatchJobs: nothing)
//	→ superseded                  superseded_by: the retry's job; by, bulk
//
// By and Bulk are set only when the caller said (CancelParams,
// RetryParams): the audit of who acted, and in which bulk action.
type TransitionData struct {
	Worker       string    `json:"worker,omitempty"`
	ErrorKind    ErrorKind `json:"error_kind,omitempty"`
	ErrorMessage string    `json:"error_message,omitempty"`
	Handback     bool      `json:"handback,omitempty"`
	Supersedes   string    `json:"supersedes,omitempty"`
	SupersededBy string    `json:"superseded_by,omitempty"`
	By           string    `json:"by,omitempty"`
	Bulk         string    `json:"bulk,omitempty"`
}

// JSON encodes d; nil when d is empty, so an event without data stores
// NULL.
func (d TransitionData) JSON() json.RawMessage {
	if d == (TransitionData{}) {
		return nil
	}
	b, _ := json.Marshal(d) // cannot fail: strings and a bool
	return b
}

// ExecutionOptions are a job's execution_options: how the worker runs it.
// Its fields are in the order of their JSON names, so its encoding is
// canonical (a submission's fingerprint encodes it with the request).
type ExecutionOptions struct {
	// Deadline, when set, is when the client waiting for the job's answer
	// stops waiting (a chat completion's, from its SDK's timeout). No
	// attempt is begun, and no backoff waited, that would end after it:
	// a failure that would be retried later fails the job at once, so
	// that the client gets promptkit's answer while it waits. A call
	// already made is not cut short. It is not a submission's option
	// (ParseExecutionOptions refuses it).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Depth is how many ancestor prompts (parent_id) are sent as history;
	// nil uses the worker's default, 0 sends none.
	Depth *int `json:"depth,omitempty"`
	// Model overrides the profile's model.
	Model string `json:"model,omitempty"`
	// PreferProvider runs the job on this backend instead of the
	// profile's; the backend must serve the model (a profile uses it with
	// that model).
	PreferProvider string `json:"prefer_provider,omitempty"`
	// Stream has the worker call the backend streaming and publish the
	// answer's pieces as they come (Notifier.PublishDelta), for a request
	// that relays them to its client: a chat completion with stream:
	// true. It is not a submission's option (ParseExecutionOptions
	// refuses it).
	Stream bool `json:"stream,omitempty"`
}

// checkDepth refuses a depth outside 0–MaxDepth.
func (o ExecutionOptions) checkDepth() error {
	if o.Depth != nil && (*o.Depth < 0 || *o.Depth > MaxDepth) {
		return invalidField("execution_options.depth", "must be from 0 to %d", MaxDepth)
	}
	return nil
}

// ParseExecutionOptions decodes the execution_options of a submission
// (Submission) strictly: an unknown key or a bad value matches ErrInvalid
// and names the key. Empty input means no options. router_model is
// refused: promptkit routes one model across the backends of a profile's
// model group (docs/routing.md), and does not choose between models, so
// there is nothing for a router model to drive. A NUL in model or
// prefer_provider is left for
// EnqueueParams.Normalize to refuse.
func ParseExecutionOptions(raw json.RawMessage) (ExecutionOptions, error) {
	o, err := parseExecutionOptions(raw)
	if err != nil && jsonNUL(raw) >= 0 {
		// Refused as a NUL, so that no error names a key holding one.
		return o, invalidField("execution_options", msgNUL)
	}
	return o, err
}

func parseExecutionOptions(raw json.RawMessage) (ExecutionOptions, error) {
	var o ExecutionOptions
	if len(bytes.TrimSpace(raw)) == 0 {
		return o, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return o, invalid("execution_options is not a JSON object")
	}
	for k, v := range keys {
		var err error
		switch k {
		case "model":
			err = json.Unmarshal(v, &o.Model)
		case "prefer_provider":
			err = json.Unmarshal(v, &o.PreferProvider)
		case "depth":
			if err = json.Unmarshal(v, &o.Depth); err == nil {
				if err := o.checkDepth(); err != nil {
					return o, err
				}
			}
		case "router_model":
			return o, invalid("execution_options.router_model is not supported: promptkit does not choose between models; it routes a profile's model across the backends of its model group (see docs/routing.md); set model, or prefer_provider to pin one backend")
		case "profile":
			return o, invalid("execution_options.profile: set the prompt's profile instead")
		default:
			return o, invalid("execution_options has an unknown key %q (known: model, depth, prefer_provider)", k)
		}
		if err != nil {
			return o, invalid("execution_options.%s has the wrong type", k)
		}
	}
	return o, nil
}

// JSON encodes the options compactly, {} when there are none: the form
// the stores keep in their execution_options column.
func (o ExecutionOptions) JSON() json.RawMessage {
	b, _ := json.Marshal(o) // cannot fail: strings, an int and a bool
	return b
}

// DecodeExecutionOptions reads the stored form (JSON); a key this build
// does not know is ignored, as stored data may be older.
func DecodeExecutionOptions(b []byte) (ExecutionOptions, error) {
	var o ExecutionOptions
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("execution_options: %w", err)
	}
	return o, nil
}

// Submission is one prompt to queue, written as JSON: the body of
// POST /v1/prompts and a line of `promptkit submit --file`. Params turns
// it into EnqueueParams, which then check it.
type Submission struct {
	// Text, or Prompt (a named prompt's id) with Inputs.
	Text         string          `json:"text,omitempty"`
	Prompt       string          `json:"prompt,omitempty"`
	Inputs       json.RawMessage `json:"inputs,omitempty"`
	Priority     *int            `json:"priority,omitempty"`
	Profile      string          `json:"profile,omitempty"`
	ParentID     string          `json:"parent_id,omitempty"`
	DependsOn    string          `json:"depends_on,omitempty"`
	ScheduledFor *time.Time      `json:"scheduled_for,omitempty"`
	// MaxAttempts, when set, is 1 to MaxMaxAttempts (an explicit 0 is
	// refused, not taken as the default).
	MaxAttempts *int `json:"max_attempts,omitempty"`
	// ExecutionOptions is decoded by Params (ParseExecutionOptions), so
	// that its errors name the key at fault.
	ExecutionOptions json.RawMessage `json:"execution_options,omitempty"`
}

// Params is s as normalized enqueue parameters, without org, user or
// idempotency key; a JSON null for inputs or options means none. The
// options are decoded here, and their errors come after the other
// parameters', as they always have.
func (s Submission) Params() (EnqueueParams, error) {
	p := EnqueueParams{
		Text: s.Text, PromptRef: s.Prompt, Inputs: nullToNil(s.Inputs), Priority: s.Priority,
		Profile: s.Profile, ParentID: s.ParentID, DependsOn: s.DependsOn,
	}
	if s.MaxAttempts != nil {
		if err := CheckMaxAttempts(*s.MaxAttempts); err != nil {
			return p, err
		}
		p.MaxAttempts = *s.MaxAttempts
	}
	if s.ScheduledFor != nil {
		p.AvailableAt = *s.ScheduledFor
	}
	opts, optsErr := ParseExecutionOptions(nullToNil(s.ExecutionOptions))
	if optsErr == nil {
		p.ExecutionOptions = opts
	}
	p, err := p.Normalize()
	if err != nil {
		return p, err
	}
	return p, optsErr
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}

// Deadline is when the client waiting for j stops waiting
// (ExecutionOptions.Deadline); ok is false when none waits with one, as
// for a retry's job, which copies the options of the job it retries but
// not its client.
func (j Job) Deadline() (time.Time, bool) {
	d := j.ExecutionOptions.Deadline
	if d == nil || j.Supersedes != "" {
		return time.Time{}, false
	}
	return *d, true
}
