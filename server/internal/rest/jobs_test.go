package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/apitest"
	"github.com/promptkit/promptkit/server/internal/auth"
)

// TestGetPromptAndJob: GET /v1/prompts/{id} is the prompt, its current
// job, its history and (once it has one) its answer; GET /v1/jobs/{id}
// the job with its events in order. The creator and its org's admin see
// them; another member of the org and another org's member get 404, as
// does an unknown id.
func TestGetPromptAndJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.submit(ann, `{"text": "hello", "priority": 10, "max_attempts": 2}`)

	var v PromptView
	r := f.ok(ann, "GET", "/v1/prompts/"+s.PromptID, "", http.StatusOK, &v)
	if v.Prompt.ID != s.PromptID || v.Prompt.Text != "hello" || v.Prompt.OrgID != "acme" || v.Prompt.CreatedBy != "ann" ||
		v.Job.ID != s.JobID || v.Job.State != jobs.Queued || v.Job.Priority != 10 || v.Job.MaxAttempts != 2 ||
		v.Answer != nil || len(v.Jobs) != 1 || v.Jobs[0].ID != s.JobID {
		t.Fatalf("prompt: %s", r.Body)
	}
	// The answer is null on the wire until there is one.
	var raw map[string]json.RawMessage
	r.Decode(t, &raw)
	if string(raw["answer"]) != "null" {
		t.Errorf("answer of a queued prompt: %s, want null", raw["answer"])
	}

	f.clk.Advance(1)
	f.succeed(s.JobID, "# the answer")
	r = f.ok(ann, "GET", "/v1/prompts/"+s.PromptID, "", http.StatusOK, &v)
	if v.Job.State != jobs.Succeeded || v.Answer == nil || v.Answer.Output != "# the answer" || v.Answer.JobID != s.JobID ||
		!strings.Contains(v.Answer.HTML, "the answer</h") {
		t.Fatalf("answered prompt: %s", r.Body)
	}

	var jv JobView
	r = f.ok(ann, "GET", "/v1/jobs/"+s.JobID, "", http.StatusOK, &jv)
	var path []string
	for _, ev := range jv.Events {
		if ev.JobID != s.JobID {
			t.Errorf("event of job %s", ev.JobID)
		}
		path = append(path, fmt.Sprintf("%s>%s", ev.From, ev.To))
	}
	if jv.Job.ID != s.JobID || jv.Job.State != jobs.Succeeded || strings.Join(path, " ") != ">queued queued>running running>succeeded" {
		t.Fatalf("job: %s", r.Body)
	}

	f.ok(boss, "GET", "/v1/prompts/"+s.PromptID, "", http.StatusOK, nil)
	f.ok(boss, "GET", "/v1/jobs/"+s.JobID, "", http.StatusOK, nil)
	for _, c := range []struct {
		who  string
		id   auth.Identity
		path string
	}{
		{"bob", bob, "/v1/prompts/" + s.PromptID}, {"bob", bob, "/v1/jobs/" + s.JobID},
		{"bea", bea, "/v1/prompts/" + s.PromptID}, {"bea", bea, "/v1/jobs/" + s.JobID},
		{"ann", ann, "/v1/prompts/nope"}, {"ann", ann, "/v1/jobs/nope"},
	} {
		r := f.call(c.id, "GET", c.path, "")
		apitest.CheckProblem(t, c.who+" GET "+c.path, r, http.StatusNotFound, "not_found")
		if strings.Contains(string(r.Body), "hello") {
			t.Errorf("%s GET %s tells the prompt: %s", c.who, c.path, r.Body)
		}
	}
}

// TestCancel: POST /v1/jobs/{id}/cancel cancels a queued or a running
// job (200 with the job); a job that is over is a 409 conflict; another
// member's or org's job is a 404 and stays as it was.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	queued := f.submit(ann, `{"text": "queued"}`)
	for _, id := range []auth.Identity{bob, bea} {
		f.refused(id, "POST", "/v1/jobs/"+queued.JobID+"/cancel", "", http.StatusNotFound, "not_found")
	}
	if j := f.job(queued.JobID); j.State != jobs.Queued {
		t.Fatalf("after the refused cancels the job is %s", j.State)
	}
	var c struct {
		Job JobOut `json:"job"`
	}
	f.ok(ann, "POST", "/v1/jobs/"+queued.JobID+"/cancel", "", http.StatusOK, &c)
	if c.Job.ID != queued.JobID || c.Job.State != jobs.Cancelled || f.job(queued.JobID).State != jobs.Cancelled {
		t.Fatalf("cancel: %+v", c.Job)
	}
	f.refused(ann, "POST", "/v1/jobs/"+queued.JobID+"/cancel", "", http.StatusConflict, "conflict", "cancelled")

	running := f.submit(ann, `{"text": "running"}`)
	apitest.Claim(t, f.st, running.JobID)
	f.ok(boss, "POST", "/v1/jobs/"+running.JobID+"/cancel", "", http.StatusOK, &c)
	if c.Job.State != jobs.Cancelled || f.job(running.JobID).State != jobs.Cancelled {
		t.Fatalf("cancel of a running job: %+v", c.Job)
	}
	f.refused(ann, "POST", "/v1/jobs/nope/cancel", "", http.StatusNotFound, "not_found")
	if !f.logs.Contains("job cancelled") {
		t.Errorf("no cancel logged: %s", f.logs)
	}
}

// TestRetry: POST /v1/prompts/{id}/retry of a prompt whose job is over
// answers 202 with a new queued job that supersedes it (with the
// priority asked for), which the prompt's history shows; a prompt whose
// job is queued or running is a 409 and makes no job; another member's
// or org's prompt is a 404; a bad body is a 400.
func TestRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.submit(ann, `{"text": "again", "priority": 7}`)
	retry := "/v1/prompts/" + s.PromptID + "/retry"

	f.refused(ann, "POST", retry, "", http.StatusConflict, "conflict", "queued")
	apitest.Claim(t, f.st, s.JobID)
	f.refused(ann, "POST", retry, "", http.StatusConflict, "conflict", "running")
	if n := f.count(); n != 1 || f.job(s.JobID).State != jobs.Running {
		t.Fatalf("after refused retries: %d jobs, the job %s", n, f.job(s.JobID).State)
	}
	if _, err := f.st.Succeed(t.Context(), jobs.SucceedParams{JobID: s.JobID, Worker: "w", Answer: jobs.Answer{Output: "first"}}); err != nil {
		t.Fatal(err)
	}

	for _, id := range []auth.Identity{bob, bea} {
		f.refused(id, "POST", retry, "", http.StatusNotFound, "not_found")
	}
	f.refused(ann, "POST", "/v1/prompts/nope/retry", "", http.StatusNotFound, "not_found")
	f.refused(ann, "POST", retry, `{"prio": 1}`, http.StatusBadRequest, "invalid_json", "prio")
	f.refused(ann, "POST", retry, `{"priority": 101}`, http.StatusBadRequest, "invalid_request", "priority")
	if n := f.count(); n != 1 {
		t.Fatalf("%d jobs after refused retries, want 1", n)
	}

	// Without a body: the old job's priority.
	var a Submitted
	f.ok(ann, "POST", retry, "", http.StatusAccepted, &a)
	if a.PromptID != s.PromptID || a.JobID == s.JobID || a.State != jobs.Queued {
		t.Fatalf("retry: %+v", a)
	}
	if j := f.job(a.JobID); j.Supersedes != s.JobID || j.Priority != 7 || j.CreatedBy != "ann" {
		t.Errorf("the retry's job %+v, want superseding %s with priority 7", j, s.JobID)
	}
	var v PromptView
	f.ok(ann, "GET", "/v1/prompts/"+s.PromptID, "", http.StatusOK, &v)
	if v.Job.ID != a.JobID || v.Answer != nil || len(v.Jobs) != 2 || v.Jobs[0].ID != s.JobID ||
		v.Jobs[0].State != jobs.Superseded || v.Jobs[1].ID != a.JobID {
		t.Fatalf("history after the retry: %+v", v)
	}

	// An admin retries a cancelled job with another priority.
	f.ok(ann, "POST", "/v1/jobs/"+a.JobID+"/cancel", "", http.StatusOK, nil)
	var b Submitted
	f.ok(boss, "POST", retry, `{"priority": 3}`, http.StatusAccepted, &b)
	if j := f.job(b.JobID); j.Supersedes != a.JobID || j.Priority != 3 || j.State != jobs.Queued {
		t.Errorf("the second retry's job %+v, want superseding %s with priority 3", j, a.JobID)
	}
	f.ok(ann, "GET", "/v1/prompts/"+s.PromptID, "", http.StatusOK, &v)
	if len(v.Jobs) != 3 || v.Job.ID != b.JobID || v.Jobs[1].State != jobs.Superseded {
		t.Errorf("history after two retries: %+v", v.Jobs)
	}
	if n := f.count(); n != 3 {
		t.Errorf("%d jobs, want 3", n)
	}
}
