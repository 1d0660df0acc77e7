package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// settle claims jobID and succeeds it with one priced call's attempt event
// (cost < 0: unknown), as a worker would; the call reports its input and
// output counts, and its cached and reasoning counts when details has
// them.
func (e *env) settle(jobID, model string, in, out int, cost float64, details ...pktype.Usage) {
	e.t.Helper()
	ctx := context.Background()
	js, err := e.st.Claim(ctx, jobs.ClaimParams{Worker: "test-worker", Limit: 1})
	if err != nil || len(js) != 1 || js[0].ID != jobID {
		e.t.Fatalf("claim %s: %v %v", jobID, js, err)
	}
	ev := jobs.AttemptEvent{Dispatched: true, Generation: 1, Attempt: 1, Outcome: "success", Model: model}
	for _, d := range details {
		ev.Usage = jobs.AttemptUsage(d)
	}
	ev.Usage.PromptTokens, ev.Usage.CompletionTokens = in, out
	ev.Usage.Known.PromptTokens, ev.Usage.Known.CompletionTokens = true, true
	if cost >= 0 {
		ev.CostUSD = &cost
	}
	if _, err := e.st.Succeed(ctx, jobs.SucceedParams{JobID: jobID, Worker: "test-worker", Answer: jobs.Answer{Output: "ok", Model: model},
		AttemptEvents: []json.RawMessage{ev.JSON()}}); err != nil {
		e.t.Fatal(err)
	}
}

// tokenID is the ID of the token of org and user.
func (e *env) tokenID(org, user string) string {
	e.t.Helper()
	ts, err := e.st.ListTokens(context.Background(), org)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, t := range ts {
		if t.UserID == user {
			return t.ID
		}
	}
	e.t.Fatalf("no token of %s/%s", org, user)
	return ""
}

// results flattens a usage page's buckets into "key=value" summaries of
// each result's group, requests, tokens and cost, with the calls left out
// of the cost, cached and reasoning sums.
func results(p usagePage) []string {
	var out []string
	for _, b := range p.Data {
		for _, r := range b.Results {
			s := fmt.Sprintf("%d:", b.StartTime)
			for _, g := range []struct {
				name string
				v    *string
			}{{"org", r.OrgID}, {"user", r.UserID}, {"key", r.APIKeyID}, {"model", r.Model}} {
				if g.v != nil {
					s += g.name + "=" + *g.v + " "
				}
			}
			out = append(out, s+fmt.Sprintf("n=%d in=%d out=%d $%.2f unknown=%d cached=%d?%d reasoning=%d?%d", r.NumModelRequests,
				r.InputTokens, r.OutputTokens, r.CostUSD, r.UnknownCostRequests, r.InputCachedTokens, r.UnknownCachedRequests,
				r.OutputReasoningTokens, r.UnknownReasoningRequests))
		}
	}
	return out
}

// Jobs carry the token they were submitted with, and GET /v1/usage shows
// a member its own calls, an admin its org's, in OpenAI's usage shape.
func TestUsage(t *testing.T) {
	// The store's clock: every call of the test is on one day.
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	onStores(t, jobs.Options{Now: func() time.Time { return at }}, func(t *testing.T, e *env) {
		ann := e.token("acme", "ann", jobs.RoleMember)
		bob := e.token("acme", "bob", jobs.RoleMember)
		boss := e.token("acme", "boss", jobs.RoleAdmin)
		eve := e.token("evil", "eve", jobs.RoleAdmin)
		a := e.submit(ann, map[string]any{"text": "a"})
		e.settle(a.JobID, "m1", 100, 10, 0.5, pktype.Usage{TokenUsage: pktype.TokenUsage{CachedTokens: 20, ReasoningTokens: 4},
			Known: pktype.TokenUsagePresence{CachedTokens: true, ReasoningTokens: true}})
		b := e.submit(bob, map[string]any{"text": "b"})
		e.settle(b.JobID, "m2", 5, 5, -1)
		c := e.submit(eve, map[string]any{"text": "c"})
		e.settle(c.JobID, "m1", 1, 1, 0.25)
		if j, _ := e.st.GetJob(context.Background(), "", a.JobID); j.TokenID != e.tokenID("acme", "ann") {
			t.Fatalf("ann's job carries token %q", j.TokenID)
		}

		var jv jobView
		e.call("GET", "/v1/jobs/"+a.JobID, ann, nil).decode(t, &jv)
		if !jv.Cost.Known || jv.Cost.USD != 0.5 {
			t.Errorf("ann's job cost %+v, want 0.5", jv.Cost)
		}
		e.call("GET", "/v1/jobs/"+b.JobID, bob, nil).decode(t, &jv)
		if jv.Cost.Known {
			t.Errorf("bob's job cost %+v, want unknown", jv.Cost)
		}

		end := at.Add(time.Hour).Unix()
		q := fmt.Sprintf("/v1/usage?start_time=0&end_time=%d&group_by=user_id,api_key_id,model", end)
		start := "0:"
		annKey, bobKey := e.tokenID("acme", "ann"), e.tokenID("acme", "bob")
		for _, c := range []struct {
			name, token string
			want        []string
		}{
			{"member", ann, []string{start + "user=ann key=" + annKey + " model=m1 n=1 in=100 out=10 $0.50 unknown=0 cached=20?0 reasoning=4?0"}},
			{"admin", boss, []string{
				start + "user=ann key=" + annKey + " model=m1 n=1 in=100 out=10 $0.50 unknown=0 cached=20?0 reasoning=4?0",
				start + "user=bob key=" + bobKey + " model=m2 n=1 in=5 out=5 $0.00 unknown=1 cached=0?1 reasoning=0?1",
			}},
		} {
			var p usagePage
			r := e.call("GET", q, c.token, nil)
			r.decode(t, &p)
			if r.code != http.StatusOK || p.Object != "page" || len(p.Data) != 1 || p.Data[0].EndTime != end {
				t.Fatalf("%s: %d %s", c.name, r.code, r.body)
			}
			if got := results(p); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%s sees %q\nwant %q", c.name, got, c.want)
			}
		}
		// A member asking for another user's calls gets none.
		var p usagePage
		e.call("GET", fmt.Sprintf("/v1/usage?start_time=0&end_time=%d&user_ids=bob", end), ann, nil).decode(t, &p)
		if got := results(p); len(got) != 0 {
			t.Errorf("ann sees bob's usage: %q", got)
		}
		// No grouping: one result; daily: one bucket per day.
		e.call("GET", fmt.Sprintf("/v1/usage?start_time=0&end_time=%d", end), boss, nil).decode(t, &p)
		if got := results(p); fmt.Sprint(got) != fmt.Sprint([]string{"0:n=2 in=105 out=15 $0.50 unknown=1 cached=20?1 reasoning=4?1"}) {
			t.Errorf("admin, no grouping: %q", got)
		}
		day := at.Truncate(24 * time.Hour)
		r := e.call("GET", fmt.Sprintf("/v1/usage?start_time=%d&end_time=%d&bucket_width=1d", day.Add(-24*time.Hour).Unix(),
			day.Add(48*time.Hour).Unix()), boss, nil)
		r.decode(t, &p)
		if len(p.Data) != 3 || len(p.Data[0].Results) != 0 || len(p.Data[1].Results) != 1 || p.Data[1].StartTime != day.Unix() ||
			p.Data[1].EndTime != day.Add(24*time.Hour).Unix() {
			t.Errorf("daily buckets: %s", r.body)
		}
	})
}

// In local mode (no tokens) jobs carry no token, and the usage is every
// org's.
func TestUsageLocalMode(t *testing.T) {
	e := setup(t)
	s := e.submit("", map[string]any{"text": "a"})
	e.settle(s.JobID, "m1", 3, 4, 1)
	if j, _ := e.st.GetJob(context.Background(), "", s.JobID); j.TokenID != "" {
		t.Fatalf("local job carries token %q", j.TokenID)
	}
	var p usagePage
	e.call("GET", fmt.Sprintf("/v1/usage?start_time=0&end_time=%d&group_by=org_id", time.Now().Add(time.Hour).Unix()), "", nil).decode(t, &p)
	if got := results(p); fmt.Sprint(got) != fmt.Sprint([]string{"0:org=default n=1 in=3 out=4 $1.00 unknown=0 cached=0?1 reasoning=0?1"}) {
		t.Errorf("local usage: %q", got)
	}
}
