package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// call is one priced provider call's attempt event (cost < 0: unknown),
// its input and output counts known.
func call(model string, in, out int, cost float64) json.RawMessage {
	ev := jobs.AttemptEvent{Dispatched: true, Generation: 1, Attempt: 1, Outcome: "success", Model: model}
	ev.Usage.PromptTokens, ev.Usage.CompletionTokens = in, out
	ev.Usage.Known.PromptTokens, ev.Usage.Known.CompletionTokens = true, true
	if cost >= 0 {
		ev.CostUSD = &cost
	}
	return ev.JSON()
}

// usageResults flattens a usage page into "start: group n= in= out= $
// unknown=" lines, one per result.
func usageResults(p UsagePage) []string {
	var out []string
	for _, b := range p.Data {
		for _, r := range b.Results {
			s := fmt.Sprintf("%d:", b.StartTime)
			for _, g := range []struct {
				name string
				v    *string
			}{{"org", r.OrgID}, {"user", r.UserID}, {"key", r.APIKeyID}, {"model", r.Model}} {
				if g.v != nil {
					s += " " + g.name + "=" + *g.v
				}
			}
			out = append(out, s+fmt.Sprintf(" n=%d in=%d out=%d $%.2f unknown=%d", r.NumModelRequests, r.InputTokens,
				r.OutputTokens, r.CostUSD, r.UnknownCostRequests))
		}
	}
	return out
}

// TestUsage: GET /v1/usage sums the provider calls in the caller's
// scope, in OpenAI's usage shape: a member its own (another user's asked
// for: nothing), an admin its org's, the local identity every org's;
// grouped as asked, in one bucket or one per UTC day; end_time defaults
// to the clock's current second. GET /v1/jobs/{id} carries the job's
// cost, null when a call's is unknown.
func TestUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.submit(ann, `{"text": "a"}`)
	f.succeed(a.JobID, "ok", call("m1", 100, 10, 0.5))
	b := f.submit(bob, `{"text": "b"}`)
	f.succeed(b.JobID, "ok", call("m2", 5, 5, -1))
	c := f.submit(bea, `{"text": "c"}`)
	f.succeed(c.JobID, "ok", call("m1", 1, 1, 0.25))

	var jv JobView
	f.ok(ann, "GET", "/v1/jobs/"+a.JobID, "", http.StatusOK, &jv)
	if !jv.Cost.Known || jv.Cost.USD != 0.5 {
		t.Errorf("ann's job cost %+v, want 0.5", jv.Cost)
	}
	r := f.ok(bob, "GET", "/v1/jobs/"+b.JobID, "", http.StatusOK, &jv)
	var raw map[string]json.RawMessage
	r.Decode(t, &raw)
	if string(raw["cost_usd"]) != "null" {
		t.Errorf("bob's job cost %s, want null", raw["cost_usd"])
	}

	end := apitest.Start.Add(time.Hour).Unix()
	grouped := fmt.Sprintf("/v1/usage?start_time=0&end_time=%d&group_by=user_id,api_key_id,model", end)
	for _, c := range []struct {
		name  string
		id    auth.Identity
		query string
		want  []string
	}{
		{"member", ann, grouped, []string{"0: user=ann key=tok_ann model=m1 n=1 in=100 out=10 $0.50 unknown=0"}},
		{"admin", boss, grouped, []string{
			"0: user=ann key=tok_ann model=m1 n=1 in=100 out=10 $0.50 unknown=0",
			"0: user=bob key=tok_bob model=m2 n=1 in=5 out=5 $0.00 unknown=1",
		}},
		{"member asking for another user", ann, grouped + "&user_ids=bob", nil},
		{"admin filtering by user", boss, grouped + "&user_ids=bob", []string{"0: user=bob key=tok_bob model=m2 n=1 in=5 out=5 $0.00 unknown=1"}},
		{"admin, no grouping", boss, fmt.Sprintf("/v1/usage?start_time=0&end_time=%d", end), []string{"0: n=2 in=105 out=15 $0.50 unknown=1"}},
		{"local, by org", auth.Local, fmt.Sprintf("/v1/usage?start_time=0&end_time=%d&group_by=org_id", end), []string{
			"0: org=acme n=2 in=105 out=15 $0.50 unknown=1", "0: org=beta n=1 in=1 out=1 $0.25 unknown=0",
		}},
	} {
		var p UsagePage
		r := f.ok(c.id, "GET", c.query, "", http.StatusOK, &p)
		if p.Object != "page" || len(p.Data) != 1 || p.Data[0].Object != "bucket" || p.Data[0].StartTime != 0 || p.Data[0].EndTime != end {
			t.Errorf("%s: %s", c.name, r.Body)
			continue
		}
		if got := usageResults(p); !slices.Equal(got, c.want) {
			t.Errorf("%s sees %q\nwant %q", c.name, got, c.want)
		}
	}

	// Daily: one bucket per UTC day of the range, empty days included;
	// no end_time: up to the clock's current second.
	f.clk.Advance(90 * time.Minute)
	day := apitest.Start.Truncate(24 * time.Hour)
	var p UsagePage
	r = f.ok(boss, "GET", fmt.Sprintf("/v1/usage?start_time=%d&bucket_width=1d", day.Add(-24*time.Hour).Unix()), "", http.StatusOK, &p)
	now := f.clk.Now().Truncate(time.Second).Add(time.Second).Unix()
	if len(p.Data) != 2 || len(p.Data[0].Results) != 0 || len(p.Data[1].Results) != 1 || p.Data[1].StartTime != day.Unix() ||
		p.Data[1].EndTime != now || p.Data[1].Results[0].NumModelRequests != 2 {
		t.Errorf("daily buckets up to now (%d): %s", now, r.Body)
	}
}

// TestUsageBadQuery: a bad query parameter is a 400 whose message names
// it.
func TestUsageBadQuery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for q, param := range map[string]string{
		"":                          "start_time",
		"start_time=x":              "start_time",
		"start_time=-1":             "start_time",
		"start_time=10&end_time=10": "end_time",
		"start_time=0&end_time=100&bucket_width=1h": "bucket_width",
		"start_time=0&bucket_width=1d":              "bucket_width", // more than 366 days
		"start_time=0&group_by=project_id":          "group_by",
		"start_time=0&group_by=model,model":         "group_by",
		"start_time=0&models=a&models=b":            "models",
		"start_time=0&limit=7":                      "limit",
	} {
		f.refused(boss, "GET", "/v1/usage?"+q, "", http.StatusBadRequest, "invalid_request", param)
	}
}

// TestProfiles: without an engine GET /v1/profiles lists none, as empty
// JSON lists and maps, not nulls.
func TestProfiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.ok(ann, "GET", "/v1/profiles", "", http.StatusOK, nil)
	if got := string(r.Body); got != `{"profiles":[],"default":"","labels":{}}`+"\n" {
		t.Errorf("profiles: %s", got)
	}
}

// TestProfileLabel: a profile's label, else its id made readable.
func TestProfileLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ id, label, want string }{
		{"long-context", "", "Long context"},
		{"fast_v2.mini", "", "Fast v2 mini"},
		{"x", "  Custom name ", "Custom name"},
		{"éclair", "", "Éclair"},
		{"--", "", "--"},
	} {
		if got := ProfileLabel(promptkit.Profile{ID: c.id, Label: c.label}); got != c.want {
			t.Errorf("ProfileLabel(%q, %q) = %q, want %q", c.id, c.label, got, c.want)
		}
	}
}
