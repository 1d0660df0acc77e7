package jobs_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// designTransitions is the job design's transition table, line by line; the
// two running → failed lines (budget spent, stuck) are one edge.
var designTransitions = [][2]jobs.State{
	{jobs.Queued, jobs.Running},
	{jobs.Queued, jobs.Cancelled},
	{jobs.Running, jobs.Succeeded},
	{jobs.Running, jobs.Queued},
	{jobs.Running, jobs.Failed},
	{jobs.Running, jobs.Failed},
	{jobs.Running, jobs.Cancelled},
	{jobs.Succeeded, jobs.Superseded},
	{jobs.Failed, jobs.Superseded},
	{jobs.Cancelled, jobs.Superseded},
}

func TestTransitionsMatchDesign(t *testing.T) {
	design := map[[2]jobs.State]bool{}
	for _, e := range designTransitions {
		design[e] = true
	}
	table := map[[2]jobs.State]bool{}
	for _, tr := range jobs.Transitions() {
		e := [2]jobs.State{tr.From, tr.To}
		if table[e] {
			t.Errorf("Transitions lists %s → %s twice", tr.From, tr.To)
		}
		table[e] = true
		if !design[e] {
			t.Errorf("Transitions has %s → %s, which the design does not allow", tr.From, tr.To)
		}
		if tr.Trigger == "" {
			t.Errorf("%s → %s has no trigger", tr.From, tr.To)
		}
	}
	for e := range design {
		if !table[e] {
			t.Errorf("Transitions lacks the design's %s → %s", e[0], e[1])
		}
	}
}

func TestAllowedEdges(t *testing.T) {
	for _, tr := range jobs.Transitions() {
		if !jobs.CanTransition(tr.From, tr.To) {
			t.Errorf("CanTransition(%s, %s) = false", tr.From, tr.To)
		}
		if err := jobs.CheckTransition(tr.From, tr.To); err != nil {
			t.Errorf("CheckTransition(%s, %s) = %v", tr.From, tr.To, err)
		}
	}
}

func TestForbiddenPairs(t *testing.T) {
	allowed := map[[2]jobs.State]bool{}
	for _, e := range designTransitions {
		allowed[e] = true
	}
	forbidden := 0
	for _, from := range jobs.States() {
		for _, to := range jobs.States() {
			if allowed[[2]jobs.State{from, to}] {
				continue
			}
			forbidden++
			if jobs.CanTransition(from, to) {
				t.Errorf("CanTransition(%s, %s) = true", from, to)
			}
			err := jobs.CheckTransition(from, to)
			var te *jobs.TransitionError
			if !errors.As(err, &te) || te.From != from || te.To != to {
				t.Errorf("CheckTransition(%s, %s) = %v, want *TransitionError naming both", from, to, err)
				continue
			}
			if !errors.Is(err, jobs.ErrIllegalTransition) {
				t.Errorf("CheckTransition(%s, %s) does not match ErrIllegalTransition", from, to)
			}
			if errors.Is(err, jobs.ErrNotClaimed) || errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("TransitionError matches an unrelated sentinel")
			}
		}
	}
	if want := len(jobs.States())*len(jobs.States()) - 9; forbidden != want {
		t.Errorf("%d forbidden pairs, want %d", forbidden, want)
	}
	// Unknown states are never allowed.
	if jobs.CanTransition("bogus", jobs.Running) || jobs.CanTransition(jobs.Queued, "") {
		t.Error("a transition with an unknown state is allowed")
	}
}

func TestTransitionErrorText(t *testing.T) {
	err := jobs.CheckTransition(jobs.Succeeded, jobs.Running)
	msg := err.Error()
	if !strings.Contains(msg, "succeeded") || !strings.Contains(msg, "running") ||
		strings.Index(msg, "succeeded") > strings.Index(msg, "running") {
		t.Errorf("error %q does not name both states, from then to", msg)
	}
}

func TestTerminal(t *testing.T) {
	want := map[jobs.State]bool{
		jobs.Queued: false, jobs.Running: false,
		jobs.Succeeded: true, jobs.Failed: true, jobs.Cancelled: true, jobs.Superseded: true,
	}
	if len(jobs.States()) != len(want) {
		t.Fatalf("States has %d states, want %d", len(jobs.States()), len(want))
	}
	for _, s := range jobs.States() {
		if s.Terminal() != want[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		if !s.Valid() {
			t.Errorf("%s.Valid() = false", s)
		}
		// A terminal state leaves only to superseded.
		for _, tr := range jobs.Transitions() {
			if tr.From == s && s.Terminal() && tr.To != jobs.Superseded {
				t.Errorf("terminal %s leaves to %s", s, tr.To)
			}
		}
	}
	for _, s := range []jobs.State{"", "Queued", "done"} {
		if s.Valid() || s.Terminal() {
			t.Errorf("%q: Valid %v Terminal %v", s, s.Valid(), s.Terminal())
		}
	}
	for _, tr := range jobs.Transitions() {
		if tr.From == jobs.Superseded {
			t.Errorf("superseded leaves to %s", tr.To)
		}
	}
}

func TestResponseIDDeterministic(t *testing.T) {
	p, j := jobs.NewID(), jobs.NewID()
	a, b := jobs.ResponseID(p, j), jobs.ResponseID(p, j)
	if a != b {
		t.Fatalf("ResponseID not deterministic: %s, %s", a, b)
	}
	u, err := uuid.Parse(a)
	if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
		t.Errorf("ResponseID %s: version %v, variant %v, %v; want a UUIDv8", a, u.Version(), u.Variant(), err)
	}
	if jobs.ResponseID(p, jobs.NewID()) == a || jobs.ResponseID(jobs.NewID(), j) == a || jobs.ResponseID(j, p) == a {
		t.Error("different prompt/job pairs share a response ID")
	}
	// Pinned: PostgreSQL computes the same function in SQL (pgstore's
	// finish statement), so a change here must change it there too.
	// Stored responses keep their IDs whatever this computes.
	if got, want := jobs.ResponseID("prompt-1", "job-1"), "3424ea88-ef32-882e-9a4c-d4aa0c8b4bb4"; got != want {
		t.Errorf("ResponseID(prompt-1, job-1) = %s, want %s", got, want)
	}
}

func TestNewID(t *testing.T) {
	a, b := jobs.NewID(), jobs.NewID()
	if a == b {
		t.Fatal("NewID repeated")
	}
	for _, id := range []string{a, b} {
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Errorf("NewID %s: version %v, %v; want a UUIDv7", id, u.Version(), err)
		}
	}
}

func TestKinds(t *testing.T) {
	want := []string{"timeout", "rate_limit", "provider_5xx", "provider_4xx", "parse", "auth", "worker_crash", "stuck",
		"transport", "unknown", "invalid_request", "dependency_failed", "unstorable", "budget_exceeded"}
	if len(jobs.ErrorKinds()) != len(want) {
		t.Fatalf("ErrorKinds = %v", jobs.ErrorKinds())
	}
	for i, k := range jobs.ErrorKinds() {
		if string(k) != want[i] {
			t.Errorf("ErrorKinds()[%d] = %q, want %q", i, k, want[i])
		}
	}
}

// States, Transitions and ErrorKinds hand out copies: a caller changing
// the returned slice changes nothing for anyone else.
func TestVocabularyImmutable(t *testing.T) {
	states, kinds, trs := jobs.States(), jobs.ErrorKinds(), jobs.Transitions()
	states[0], kinds[0] = "bogus", "bogus"
	trs[0] = jobs.Transition{From: jobs.Succeeded, To: jobs.Running, Trigger: "bogus"}
	if jobs.States()[0] != jobs.Queued || jobs.ErrorKinds()[0] != jobs.KindTimeout {
		t.Error("changing a returned slice changed States or ErrorKinds")
	}
	if tr := jobs.Transitions()[0]; tr.From != jobs.Queued || tr.To != jobs.Running {
		t.Errorf("changing a returned slice changed Transitions: %+v", tr)
	}
	if jobs.CanTransition(jobs.Succeeded, jobs.Running) {
		t.Error("changing a returned slice changed the state machine")
	}
}

// A Response's JSON is its answer's fields beside its IDs and time, under
// the names the API has always used: embedding Answer adds no key. (Only
// "body" moved: it is an answer field, so it now comes before
// "created_at".)
func TestResponseJSON(t *testing.T) {
	a := jobs.Answer{Output: "o", Parsed: json.RawMessage(`{"x":1}`), Model: "m", FinishReason: "stop", Backend: "b",
		ToolCalls: []pktype.ToolCall{{ID: "c", Type: "function", Function: pktype.FunctionCall{Name: "f", Arguments: "{}"}}},
		Body:      json.RawMessage(`{"a":1}`)}
	a.Usage.PromptTokens, a.Usage.Known.PromptTokens = 3, true
	r := jobs.Response{ID: "i", PromptID: "p", JobID: "j", Answer: a, CreatedAt: time.Unix(5, 0).UTC()}
	b, err := json.Marshal(r)
	want := `{"id":"i","prompt_id":"p","job_id":"j","output":"o","parsed":{"x":1},"model":"m","finish_reason":"stop","backend":"b",` +
		`"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":null,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null},` +
		`"body":{"a":1},"created_at":"1970-01-01T00:00:05Z"}`
	if err != nil || string(b) != want {
		t.Fatalf("Response JSON =\n%s, %v\nwant\n%s", b, err, want)
	}
	var back jobs.Response
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("decoded = %+v, %v", back, err)
	}
	if b, _ := json.Marshal(jobs.Response{}); string(b) != `{"id":"","prompt_id":"","job_id":"","output":"",`+
		`"usage":{"prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null},`+
		`"created_at":"0001-01-01T00:00:00Z"}` {
		t.Errorf("empty Response JSON = %s", b)
	}
}
