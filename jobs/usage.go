package jobs

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/promptkit/promptkit/pktype"
)

// AttemptEvent is the data of an EventAttempt: one execution attempt as
// the worker records it. It is the one encoding of "what an attempt event
// says": the worker writes it, and the stores read it back to write the
// usage ledger (UsageCall) in the same transaction.
type AttemptEvent struct {
	JobAttempt     int    `json:"job_attempt"`
	Generation     uint64 `json:"generation"`
	Attempt        uint64 `json:"attempt"`
	Dispatched     bool   `json:"dispatched"`
	StatusCode     int    `json:"status_code,omitempty"`
	Outcome        string `json:"outcome"`
	Failure        string `json:"failure,omitempty"`
	CapacityWaitMS int64  `json:"capacity_wait_ms"`
	GenerationMS   int64  `json:"generation_ms"`
	// Model is the model the call was made with (the request's).
	Model string `json:"model,omitempty"`
	// Backend is the backend the call went to, when the worker says.
	Backend string `json:"backend,omitempty"`
	// Embedding marks an embedding call, which produces no output tokens.
	Embedding bool `json:"embedding,omitempty"`
	// Usage holds the counts the provider reported on this attempt; it is
	// left out when it reported none.
	Usage AttemptUsage `json:"usage,omitzero"`
	// CostUSD is the call's cost by the engine's prices; left out when it
	// is unknown (no price for the model, or usage not reported).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Detail is the provider's own message, redacted, kept only with the
	// worker's KeepProviderDetail and only on the attempt that ended the
	// run.
	Detail string `json:"detail,omitempty"`
}

// JSON encodes the event's data.
func (e *AttemptEvent) JSON() json.RawMessage {
	b, _ := json.Marshal(e) // plain fields and counts: it cannot fail
	return b
}

// DecodeAttemptEvent reads an attempt event's data. Fields it does not
// know are ignored, so older and newer workers' events both decode.
func DecodeAttemptEvent(data json.RawMessage) (AttemptEvent, error) {
	var e AttemptEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return AttemptEvent{}, fmt.Errorf("attempt event: %w", err)
	}
	return e, nil
}

// Call is the provider call the event reports, as the usage ledger keeps
// it; false when the attempt dispatched nothing (a permit wait that was
// interrupted), which costs nothing.
func (e AttemptEvent) Call() (UsageCall, bool) {
	if !e.Dispatched {
		return UsageCall{}, false
	}
	c := UsageCall{Model: e.Model, Backend: e.Backend, StatusCode: e.StatusCode, Outcome: e.Outcome, Failure: e.Failure}
	u := pktype.Usage(e.Usage)
	if u.Known.PromptTokens {
		c.InputTokens = new(int64(u.PromptTokens))
	}
	if u.Known.CompletionTokens {
		c.OutputTokens = new(int64(u.CompletionTokens))
	} else if e.Embedding && u.Known.PromptTokens {
		c.OutputTokens = new(int64(0)) // an embedding has no output
	}
	if u.Known.CachedTokens {
		c.CachedInputTokens = new(int64(u.CachedTokens))
	}
	if u.Known.ReasoningTokens {
		c.ReasoningTokens = new(int64(u.ReasoningTokens))
	} else if e.Embedding && u.Known.PromptTokens {
		c.ReasoningTokens = new(int64(0)) // nor any reasoning
	}
	if e.CostUSD != nil && !math.IsNaN(*e.CostUSD) && !math.IsInf(*e.CostUSD, 0) && *e.CostUSD >= 0 {
		c.CostUSD = new(*e.CostUSD)
	}
	return c, true
}

// AttemptUsage is an attempt's usage as its event keeps it: each count
// the provider reported, by its name, as {"value": n}.
type AttemptUsage pktype.Usage

// IsZero reports that the provider reported no count.
func (u AttemptUsage) IsZero() bool { return u.Known == pktype.TokenUsagePresence{} }

type attemptCount struct {
	Value int `json:"value"`
}

// MarshalJSON writes {"cached_tokens": {"value": 0}, "prompt_tokens":
// {"value": 12}, ...}, names sorted as events have always had them.
func (u AttemptUsage) MarshalJSON() ([]byte, error) {
	m := map[string]attemptCount{}
	for name, v := range pktype.Usage(u).Reported() {
		m[name] = attemptCount{v}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes; a count that is absent is
// unknown.
func (u *AttemptUsage) UnmarshalJSON(b []byte) error {
	var m map[string]*attemptCount
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var usage pktype.Usage
	for _, f := range []struct {
		name  string
		value *int
		known *bool
	}{
		{"prompt_tokens", &usage.PromptTokens, &usage.Known.PromptTokens},
		{"completion_tokens", &usage.CompletionTokens, &usage.Known.CompletionTokens},
		{"total_tokens", &usage.TotalTokens, &usage.Known.TotalTokens},
		{"cached_tokens", &usage.CachedTokens, &usage.Known.CachedTokens},
		{"reasoning_tokens", &usage.ReasoningTokens, &usage.Known.ReasoningTokens},
	} {
		if c := m[f.name]; c != nil {
			*f.value, *f.known = c.Value, true
		}
	}
	*u = AttemptUsage(usage)
	return nil
}

// UsageCall is one dispatched provider call as the usage ledger records
// it. A nil count or cost is unknown, never zero.
type UsageCall struct {
	Model, Backend                               string
	InputTokens, OutputTokens, CachedInputTokens *int64
	// ReasoningTokens are the output tokens the model spent reasoning: a
	// part of OutputTokens, as providers count them.
	ReasoningTokens *int64
	CostUSD         *float64
	// StatusCode is the provider's HTTP status, 0 when there was none (a
	// transport failure, a timeout, a lost call).
	StatusCode int
	// Outcome is the attempt's (pktype.ExecutionOutcome: success or
	// error), or UsageOutcomeLost; "" in rows written before the ledger
	// kept it.
	Outcome string
	// Failure is the attempt's failure kind (pktype.ExecutionFailureKind),
	// "" on success.
	Failure string
}

// UsageOutcomeLost is the Outcome of LostCall: a call that may have gone
// out and whose result nobody recorded.
const UsageOutcomeLost = "lost"

// UsageCalls are the ledger rows of the attempt events a write carries:
// one per event that reports a dispatched call. An event that does not
// decode as an AttemptEvent reports none.
func UsageCalls(events ...json.RawMessage) []UsageCall {
	var out []UsageCall
	for _, d := range events {
		e, err := DecodeAttemptEvent(d)
		if err != nil {
			continue
		}
		if c, ok := e.Call(); ok {
			out = append(out, c)
		}
	}
	return out
}

// LostCall is the ledger row Reclaim writes for a running job whose worker
// was lost, and Cancel for a running job it stops: the worker writes every
// call's attempt event before making the next call, so at most one call,
// the last, may have gone out unrecorded.
// Its model, usage and cost are unknown, and budgets count it as such;
// BackendActivity counts it as an error.
var LostCall = UsageCall{Outcome: UsageOutcomeLost}

// JobCost is a job's cost from its events: the sum of its dispatched
// attempts' costs, unknown when any of theirs is, and unknown when a
// reclaim or a cancel may have lost a call (a transition out of running
// with error_kind worker_crash or stuck, or to cancelled).
func JobCost(events []Event) pktype.Cost {
	cost := pktype.Cost{Known: true}
	for _, ev := range events {
		switch ev.Type {
		case EventAttempt:
			e, err := DecodeAttemptEvent(ev.Data)
			if err != nil {
				continue
			}
			if c, ok := e.Call(); ok {
				if c.CostUSD == nil {
					cost.Known = false
				} else {
					cost.USD += *c.CostUSD
				}
			}
		case EventTransition:
			var d TransitionData
			if ev.From != Running {
				continue
			}
			if ev.To == Cancelled || (json.Unmarshal(ev.Data, &d) == nil && (d.ErrorKind == KindWorkerCrash || d.ErrorKind == KindStuck)) {
				cost.Known = false
			}
		}
	}
	return cost
}

// UsageGroup is a dimension Store.Usage groups by.
type UsageGroup string

// Usage groups.
const (
	UsageByOrg     UsageGroup = "org"
	UsageByUser    UsageGroup = "user"
	UsageByToken   UsageGroup = "token"
	UsageByModel   UsageGroup = "model"
	UsageByBackend UsageGroup = "backend"
	UsageByDay     UsageGroup = "day"
)

// UsageParams selects and groups the usage ledger (Store.Usage).
type UsageParams struct {
	// OrgID scopes the read to one org; "" is every org (the operator).
	OrgID string
	// UserID, TokenID, Model and Backend filter; "" is any.
	UserID, TokenID, Model, Backend string
	// From and To bound the calls' times: [From, To). A zero From is from
	// the start, a zero To is now.
	From, To time.Time
	// GroupBy lists the dimensions of the buckets, each at most once; none
	// gives one bucket for everything selected.
	GroupBy []UsageGroup
}

// Normalize checks the groups (each known, none twice) and the bounds.
func (p UsageParams) Normalize() (UsageParams, error) {
	seen := map[UsageGroup]bool{}
	for _, g := range p.GroupBy {
		switch g {
		case UsageByOrg, UsageByUser, UsageByToken, UsageByModel, UsageByBackend, UsageByDay:
		default:
			return p, invalid("unknown usage group %q", g)
		}
		if seen[g] {
			return p, invalid("usage group %q given twice", g)
		}
		seen[g] = true
	}
	if !p.From.IsZero() && !p.To.IsZero() && !p.From.Before(p.To) {
		return p, invalid("usage range: from must be before to")
	}
	p.GroupBy = slices.Clone(p.GroupBy)
	return p, nil
}

// Groups reports whether p groups by g.
func (p UsageParams) Groups(g UsageGroup) bool { return slices.Contains(p.GroupBy, g) }

// UsageBucket sums the ledger's calls of one group. Counts the provider
// did not report, and costs that are unknown, are not in the sums: the
// calls they leave out are counted apart, so that unknown is never read
// as zero. Each sum is exact when its count of unknowns is 0, and a lower
// bound otherwise.
type UsageBucket struct {
	// Day is the bucket's UTC midnight, when grouped by day.
	Day time.Time `json:"day,omitzero"`
	// OrgID, UserID, TokenID, Model and Backend are set when grouped by
	// them.
	OrgID   string `json:"org_id,omitempty"`
	UserID  string `json:"user_id,omitempty"`
	TokenID string `json:"token_id,omitempty"`
	Model   string `json:"model,omitempty"`
	Backend string `json:"backend,omitempty"`
	// Requests counts provider calls, lost ones (see LostCall) included.
	Requests int64 `json:"requests"`
	// InputTokens, OutputTokens, CachedInputTokens and ReasoningTokens sum
	// known counts. Cached tokens are a part of the input tokens, reasoning
	// tokens a part of the output tokens.
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	ReasoningTokens   int64 `json:"reasoning_tokens"`
	// UnknownUsage counts calls whose input or output count is unknown.
	UnknownUsage int64 `json:"unknown_usage"`
	// UnknownCached and UnknownReasoning count calls whose cached or
	// reasoning count is unknown, whatever their other counts: a provider
	// that does not report the count, as well as a call of unknown usage
	// (an embedding's reasoning count is a known 0).
	UnknownCached    int64 `json:"unknown_cached"`
	UnknownReasoning int64 `json:"unknown_reasoning"`
	// CostUSD sums known costs.
	CostUSD float64 `json:"cost_usd"`
	// UnknownCost counts calls whose cost is unknown.
	UnknownCost int64 `json:"unknown_cost"`
}

// NewAttemptEvent is the attempt event of execution event ev (an
// ExecutionAttempt), the job's attempt jobAttempt, an embedding call's
// when embedding is set: the one mapping the worker and the front door's
// embeddings share.
func NewAttemptEvent(ev pktype.ExecutionEvent, jobAttempt int, embedding bool) AttemptEvent {
	e := AttemptEvent{
		JobAttempt: jobAttempt, Generation: ev.Generation, Attempt: ev.Attempt, Dispatched: ev.Dispatched,
		StatusCode: ev.StatusCode, Outcome: string(ev.Outcome), Failure: string(ev.Failure),
		CapacityWaitMS: ev.CapacityWait.Milliseconds(), GenerationMS: ev.GenerationDuration.Milliseconds(),
		Model: ev.Model, Backend: ev.BackendID, Embedding: embedding && ev.Dispatched, Usage: AttemptUsage(ev.Usage.Usage()),
	}
	if ev.Dispatched && ev.Cost.Known {
		e.CostUSD = new(ev.Cost.USD)
	}
	return e
}

// BackendActivity is one backend's recent provider calls, from the usage
// ledger (Store.BackendActivity). Calls counts every call; Succeeded,
// RateLimited and Errors split those whose result the ledger knows (rows
// written before it kept results count in Calls only).
type BackendActivity struct {
	Backend   string `json:"backend"`
	Calls     int    `json:"calls"`
	Succeeded int    `json:"succeeded"`
	// RateLimited counts calls the backend answered 429.
	RateLimited int `json:"rate_limited"`
	// Errors counts every other failed call: 5xx, other 4xx, transport,
	// timeout, cancelled, and lost ones (LostCall).
	Errors int `json:"errors"`
	// LastRateLimitedAt and LastErrorAt are the store times of the latest
	// such call in the window; zero when there was none.
	LastRateLimitedAt time.Time `json:"last_rate_limited_at,omitzero"`
	LastErrorAt       time.Time `json:"last_error_at,omitzero"`
	// InputTokens and OutputTokens sum known counts.
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CostUSD sums known costs.
	CostUSD float64 `json:"cost_usd"`
}

// MaxRecordCalls bounds RecordCallsParams.Calls.
const MaxRecordCalls = 1000

// RecordCallsParams are provider calls made for no job (Store.RecordCalls).
type RecordCallsParams struct {
	// OrgID, UserID and TokenID are whose calls they are; TokenID is ""
	// without a token (local mode).
	OrgID, UserID, TokenID string
	Calls                  []UsageCall
}

// Normalize checks the parameters: an org and a user, at most
// MaxRecordCalls calls, names without NUL, and counts and costs not
// negative (a cost finite).
func (p RecordCallsParams) Normalize() (RecordCallsParams, error) {
	switch {
	case p.OrgID == "" || p.UserID == "":
		return p, invalid("recorded calls need an org and a user")
	case len(p.Calls) > MaxRecordCalls:
		return p, invalid("%d calls, more than %d", len(p.Calls), MaxRecordCalls)
	}
	for _, s := range []string{p.OrgID, p.UserID, p.TokenID} {
		if strings.ContainsRune(s, 0) {
			return p, invalid("recorded calls: %s", msgNUL)
		}
	}
	for _, c := range p.Calls {
		if strings.ContainsRune(c.Model, 0) || strings.ContainsRune(c.Backend, 0) ||
			strings.ContainsRune(c.Outcome, 0) || strings.ContainsRune(c.Failure, 0) {
			return p, invalid("recorded calls: %s", msgNUL)
		}
		if c.StatusCode < 0 || c.StatusCode > 999 {
			return p, invalid("recorded calls: status code %d is not an HTTP status", c.StatusCode)
		}
		for _, n := range []*int64{c.InputTokens, c.OutputTokens, c.CachedInputTokens, c.ReasoningTokens} {
			if n != nil && *n < 0 {
				return p, invalid("recorded calls: a token count is negative")
			}
		}
		if c.CostUSD != nil && (*c.CostUSD < 0 || math.IsNaN(*c.CostUSD) || math.IsInf(*c.CostUSD, 0)) {
			return p, invalid("recorded calls: a cost is not a finite, non-negative number")
		}
	}
	return p, nil
}
