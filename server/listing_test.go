package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
)

// countReads makes the server's store a storekit.Counting, to count its
// prompt and response reads, single and batched.
func countReads(c *Config) { c.Store = storekit.Count(c.Store) }

// TestListingCarriesPromptsAndAnswers: the listing and /v1/recent give
// each prompt with its text, parent and answer (with its html), reading
// them with one batch read each, never one read per prompt.
func TestListingCarriesPromptsAndAnswers(t *testing.T) {
	onStores(t, jobs.Options{}, func(t *testing.T, e *env) {
		reads := e.srv.st.(*storekit.Counting)
		var subs []submitted
		parent := ""
		for i := range 6 {
			body := map[string]any{"text": fmt.Sprint("question ", i)}
			if parent != "" {
				body["parent_id"] = parent
			}
			s := e.submit("", body)
			subs = append(subs, s)
			parent = s.PromptID
			e.clock.Advance(time.Millisecond)
		}
		for i, s := range subs[:4] {
			e.finish(s.JobID, fmt.Sprintf("**answer %d**", i))
		}
		check := func(what string, ps []promptState) {
			t.Helper()
			if len(ps) != len(subs) {
				t.Fatalf("%s: %d prompts, want %d", what, len(ps), len(subs))
			}
			for _, st := range ps {
				i := -1
				for k, s := range subs {
					if s.PromptID == st.PromptID {
						i = k
					}
				}
				if i < 0 || st.Prompt.ID != st.PromptID || st.Prompt.Text != fmt.Sprint("question ", i) ||
					st.Prompt.CreatedBy == "" || st.Prompt.CreatedAt.IsZero() || st.Job.ID != subs[i].JobID {
					t.Errorf("%s: entry %+v", what, st)
					continue
				}
				wantParent := ""
				if i > 0 {
					wantParent = subs[i-1].PromptID
				}
				if st.Prompt.ParentID != wantParent {
					t.Errorf("%s: %s parent %q, want %q", what, st.PromptID, st.Prompt.ParentID, wantParent)
				}
				if i < 4 {
					a := st.Answer
					if a == nil || a.Output != fmt.Sprintf("**answer %d**", i) || a.JobID != st.Job.ID ||
						!strings.Contains(a.HTML, fmt.Sprintf("<strong>answer %d</strong>", i)) {
						t.Errorf("%s: %s answer %+v", what, st.PromptID, a)
					}
				} else if st.Answer != nil {
					t.Errorf("%s: queued %s has an answer %+v", what, st.PromptID, st.Answer)
				}
			}
			if n := reads.Take(); n["GetPrompt"] != 0 || n["GetResponse"] != 0 || n["GetPrompts"] != 1 || n["GetResponses"] != 1 {
				t.Errorf("%s read %v; want one GetPrompts and one GetResponses", what, n)
			}
		}
		reads.Take()
		var page promptList
		e.call("GET", "/v1/prompts", "", nil).decode(t, &page)
		check("listing", page.Prompts)
		var rec recent
		e.call("GET", "/v1/recent", "", nil).decode(t, &rec)
		check("recent", rec.Prompts)

		// An empty page reads no prompt at all.
		e.call("GET", "/v1/prompts?state=failed", "", nil).decode(t, &page)
		if len(page.Prompts) != 0 {
			t.Errorf("failed: %+v", page.Prompts)
		}
		if n := reads.Take(); n["GetPrompts"]+n["GetResponses"]+n["GetPrompt"]+n["GetResponse"] != 0 {
			t.Errorf("an empty listing read %v", n)
		}
	}, countReads)
}
