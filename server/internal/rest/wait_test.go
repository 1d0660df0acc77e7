package rest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// TestWaitAnswersWhenTheJobEnds: POST /v1/prompts?wait= holds the
// request until the job succeeds, then answers 200 with the prompt, its
// job and its answer (rendered), the ids in its headers; asked with
// X-Promptkit-Early-Hints, it sends the ids first in a 103.
func TestWaitAnswersWhenTheJobEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.start(ann, "POST", "/v1/prompts?wait=1m", `{"text": "run me"}`, httpapi.HeaderEarlyHints, "1")
	hint := p.hint(t)
	pid, jid := hint.Get(httpapi.HeaderPromptID), hint.Get(httpapi.HeaderJobID)
	j := f.job(jid)
	if pid == "" || j.PromptID != pid || j.OrgID != "acme" || j.CreatedBy != "ann" || j.State != jobs.Queued {
		t.Fatalf("the 103 named %s of %s; stored %+v", jid, pid, j)
	}
	f.clk.Advance(1)
	f.succeed(jid, "**done**")
	r := p.wait()
	var v PromptView
	r.Decode(t, &v)
	if r.Code != http.StatusOK || v.Prompt.ID != pid || v.Prompt.Text != "run me" || v.Job.ID != jid ||
		v.Job.State != jobs.Succeeded || len(v.Jobs) != 1 || v.Answer == nil || v.Answer.Output != "**done**" ||
		!strings.Contains(v.Answer.HTML, "<strong>done</strong>") {
		t.Fatalf("answer: %d %s", r.Code, r.Body)
	}
	if r.Header.Get(httpapi.HeaderPromptID) != pid || r.Header.Get(httpapi.HeaderJobID) != jid || r.Header.Get("X-Should-Retry") != "" {
		t.Errorf("answer headers %v", r.Header)
	}
}

// TestWaitWithoutHints: without X-Promptkit-Early-Hints nothing comes
// before the answer; a wait for a job that fails answers 200 with the
// failed job, its error in words, no answer, and X-Should-Retry: false.
func TestWaitWithoutHints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.start(ann, "POST", "/v1/prompts?wait=1m", `{"text": "fail me"}`)
	j := f.queuedJob("acme")
	apitest.Claim(t, f.st, j.ID)
	if _, err := f.st.Fail(context.Background(), jobs.FailParams{JobID: j.ID, Worker: "w", Kind: jobs.KindInvalidRequest,
		Message: "refused"}); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	var v PromptView
	r.Decode(t, &v)
	if r.Code != http.StatusOK || v.Job.ID != j.ID || v.Job.State != jobs.Failed || v.Answer != nil ||
		v.Job.ErrorKind != jobs.KindInvalidRequest || v.Job.ErrorTitle == "" || v.Job.ErrorTitle != jobs.KindInvalidRequest.Title() {
		t.Fatalf("answer: %d %s", r.Code, r.Body)
	}
	if got := r.Header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("X-Should-Retry %q, want false", got)
	}
	if len(p.hints) != 0 {
		t.Errorf("a 103 without being asked: %v", <-p.hints)
	}
}

// TestWaitEnds: when the wait ends before the job does (its time, or the
// server closing), the answer is the 202 of a submission, the job still
// queued.
func TestWaitEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.call(ann, "POST", "/v1/prompts?wait=1ms", `{"text": "nobody runs this"}`)
	var s Submitted
	r.Decode(t, &s)
	if r.Code != http.StatusAccepted || s.State != jobs.Queued || s.JobID == "" || r.Header.Get(httpapi.HeaderJobID) != s.JobID {
		t.Fatalf("short wait: %d %s", r.Code, r.Body)
	}
	p := f.start(ann, "POST", "/v1/prompts?wait=1m", `{"text": "nor this"}`, httpapi.HeaderEarlyHints, "true")
	jid := p.hint(t).Get(httpapi.HeaderJobID)
	f.stopServing()
	r = p.wait()
	r.Decode(t, &s)
	if r.Code != http.StatusAccepted || s.JobID != jid || s.State != jobs.Queued {
		t.Fatalf("wait ended by closing: %d %s, want 202 for %s", r.Code, r.Body, jid)
	}
}

// TestWaitForCancelledJob: a job cancelled while its submission waits
// ends the wait: 200 with the cancelled job and X-Should-Retry: false.
func TestWaitForCancelledJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.start(ann, "POST", "/v1/prompts?wait=1m", `{"text": "cancel me"}`, httpapi.HeaderEarlyHints, "1")
	jid := p.hint(t).Get(httpapi.HeaderJobID)
	f.ok(ann, "POST", "/v1/jobs/"+jid+"/cancel", "", http.StatusOK, nil)
	r := p.wait()
	var v PromptView
	r.Decode(t, &v)
	if r.Code != http.StatusOK || v.Job.ID != jid || v.Job.State != jobs.Cancelled || v.Answer != nil ||
		r.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("answer: %d %v %s", r.Code, r.Header, r.Body)
	}
}
