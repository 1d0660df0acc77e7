package jobstest

import (
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// testBatchReads checks GetPrompts and GetResponses: each returns what the
// single reads return, keyed by ID, leaves out unknown and other-org IDs,
// and refuses more than MaxListLimit IDs.
func testBatchReads(t *testing.T, h Harness) {
	f := setup(t, h)
	a1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "alice", Text: "first"})
	a2 := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", CreatedBy: "bob", Text: "second", ParentID: a1.PromptID, Priority: ptr(90)})
	b1 := f.enqueue(jobs.EnqueueParams{OrgID: "org-b", Text: "other org"})
	// a1 and b1 succeed; a2 stays queued and has no response.
	var rids []string
	for _, e := range []jobs.Enqueued{a1, b1} {
		f.claimID("w", e.JobID)
		j, err := f.store.Succeed(f.ctx, jobs.SucceedParams{JobID: e.JobID, Worker: "w", Answer: jobs.Answer{Output: "answer to " + e.PromptID,
			Model: "m"}})
		if err != nil {
			t.Fatalf("Succeed: %v", err)
		}
		rids = append(rids, j.ResponseID)
	}
	unknown := jobs.NewID()

	ids := []string{a1.PromptID, a2.PromptID, b1.PromptID, unknown, a1.PromptID}
	for _, org := range []string{"org-a", ""} {
		ps, err := f.store.GetPrompts(f.ctx, org, ids)
		if err != nil {
			t.Fatalf("GetPrompts(%q): %v", org, err)
		}
		want := []string{a1.PromptID, a2.PromptID}
		if org == "" {
			want = append(want, b1.PromptID)
		}
		if len(ps) != len(want) {
			t.Errorf("GetPrompts(%q) = %d prompts, want %d: %+v", org, len(ps), len(want), ps)
		}
		for _, id := range want {
			single, err := f.store.GetPrompt(f.ctx, org, id)
			if err != nil {
				t.Fatalf("GetPrompt: %v", err)
			}
			got, ok := ps[id]
			if !ok {
				t.Errorf("GetPrompts(%q) lacks %s", org, id)
				continue
			}
			if got.ID != single.ID || got.OrgID != single.OrgID || got.CreatedBy != single.CreatedBy ||
				got.Text != single.Text || got.ParentID != single.ParentID || got.PromptRef != single.PromptRef ||
				got.Profile != single.Profile || !got.CreatedAt.Equal(single.CreatedAt) {
				t.Errorf("GetPrompts(%q)[%s] = %+v, GetPrompt = %+v", org, id, got, single)
			}
		}
		if _, ok := ps[unknown]; ok {
			t.Errorf("GetPrompts(%q) has the unknown ID", org)
		}
	}
	if p := mustPrompts(t, f, "org-a", []string{a2.PromptID}); p[a2.PromptID].ParentID != a1.PromptID || p[a2.PromptID].Text != "second" {
		t.Errorf("GetPrompts a2 = %+v", p[a2.PromptID])
	}
	if p := mustPrompts(t, f, "org-b", []string{a1.PromptID, a2.PromptID}); len(p) != 0 {
		t.Errorf("GetPrompts other org = %+v, want none", p)
	}

	rs, err := f.store.GetResponses(f.ctx, "org-a", append(rids, unknown, rids[0]))
	if err != nil {
		t.Fatalf("GetResponses: %v", err)
	}
	if len(rs) != 1 {
		t.Errorf("GetResponses(org-a) = %+v, want only %s", rs, rids[0])
	}
	single, err := f.store.GetResponse(f.ctx, "org-a", rids[0])
	if err != nil {
		t.Fatalf("GetResponse: %v", err)
	}
	if got := rs[rids[0]]; got.ID != single.ID || got.PromptID != a1.PromptID || got.JobID != a1.JobID ||
		got.Output != single.Output || got.Model != "m" || got.Usage != single.Usage || !got.CreatedAt.Equal(single.CreatedAt) {
		t.Errorf("GetResponses[%s] = %+v, GetResponse = %+v", rids[0], got, single)
	}
	rs, err = f.store.GetResponses(f.ctx, "", rids)
	if err != nil {
		t.Fatalf("GetResponses any org: %v", err)
	}
	if len(rs) != 2 || rs[rids[1]].JobID != b1.JobID || rs[rids[1]].Output != "answer to "+b1.PromptID {
		t.Errorf("GetResponses any org = %+v", rs)
	}

	// Nothing asked, nothing found; too many is invalid.
	for _, ids := range [][]string{nil, {}} {
		if p := mustPrompts(t, f, "", ids); len(p) != 0 {
			t.Errorf("GetPrompts(%v) = %+v", ids, p)
		}
		r, err := f.store.GetResponses(f.ctx, "", ids)
		if err != nil || r == nil || len(r) != 0 {
			t.Errorf("GetResponses(%v) = %+v, %v; want an empty map", ids, r, err)
		}
	}
	many := make([]string, jobs.MaxListLimit)
	for i := range many {
		many[i] = jobs.NewID()
	}
	many[0] = a1.PromptID
	if p := mustPrompts(t, f, "", many); len(p) != 1 {
		t.Errorf("GetPrompts(MaxListLimit ids) = %d prompts, want 1", len(p))
	}
	many = append(many, jobs.NewID())
	_, err = f.store.GetPrompts(f.ctx, "", many)
	wantErr(t, err, jobs.ErrInvalid, "GetPrompts beyond MaxListLimit")
	_, err = f.store.GetResponses(f.ctx, "", many)
	wantErr(t, err, jobs.ErrInvalid, "GetResponses beyond MaxListLimit")
}

func mustPrompts(t *testing.T, f *fixture, org string, ids []string) map[string]jobs.Prompt {
	t.Helper()
	ps, err := f.store.GetPrompts(f.ctx, org, ids)
	if err != nil {
		t.Fatalf("GetPrompts: %v", err)
	}
	if ps == nil {
		t.Fatalf("GetPrompts returned a nil map")
	}
	return ps
}
