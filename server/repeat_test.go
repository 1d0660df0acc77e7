package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/openaiapi"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
)

const (
	headerRetryCount = "X-Stainless-Retry-Count"
	headerEarly      = "X-Promptkit-Early-Hints"
)

// pending is a request in flight: the test reads its 103 Early Hints
// while its job is still held, then its answer.
type pending struct {
	e       *env
	pattern string
	hints   chan http.Header
	done    chan asyncResp
}

// start sends a POST in a goroutine, recording each 103 it receives. A
// deadlock guard ends it after a minute; the test's end cancels it.
func (e *env) start(path, token, body string, headers ...string) *pending {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	p := &pending{e: e, hints: make(chan http.Header, 4), done: make(chan asyncResp, 1)}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			if code == http.StatusEarlyHints {
				p.hints <- http.Header(h).Clone()
			}
			return nil
		},
	})
	var req *http.Request
	req, p.pattern = e.request(ctx, "POST", path, token, body, headers...)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			p.done <- asyncResp{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		p.done <- asyncResp{res: res, body: b, err: err}
	}()
	return p
}

// ids returns the prompt and job the 103 Early Hints named; the answer
// coming first fails the test.
func (p *pending) ids() (promptID, jobID string) {
	p.e.t.Helper()
	select {
	case h := <-p.hints:
		return h.Get(headerPromptID), h.Get(headerJobID)
	case a := <-p.done:
		p.done <- a
		p.e.t.Fatalf("answered before a 103 Early Hints: %v", a.err)
	}
	return "", ""
}

// answer waits for the final answer and checks it against the document.
func (p *pending) answer() resp {
	p.e.t.Helper()
	a := <-p.done
	if a.err != nil {
		p.e.t.Fatal(a.err)
	}
	checkResponse(p.e.t, p.pattern, a.res.StatusCode, a.res.Header, a.body)
	return resp{code: a.res.StatusCode, header: a.res.Header, body: a.body}
}

// jobCount is how many jobs the store holds.
func (e *env) jobCount() int {
	e.t.Helper()
	page, err := e.st.ListJobs(context.Background(), jobs.ListParams{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(page.Jobs)
}

// completionOf checks that r is the completion of job jobID.
func completionOf(t *testing.T, what string, r resp, promptID, jobID string) {
	t.Helper()
	var c openaiapi.ChatCompletion
	r.decode(t, &c)
	if r.code != 200 || c.ID != "chatcmpl-"+jobID || r.header.Get(headerPromptID) != promptID || r.header.Get(headerJobID) != jobID {
		t.Errorf("%s: %d %v %s, want the completion of job %s", what, r.code, r.header, r.body, jobID)
	}
}

// TestChatRepeatsAreOneJob: a chat request without an Idempotency-Key
// joins the job of the same request from the same caller only when it
// says it is a retry (X-Stainless-Retry-Count above 0): while that job
// is queued or running, or less than the repeat window after it
// succeeded. Anything else is a sample of its own: an SDK's first call,
// a request that says nothing, the same body reformatted, another body,
// caller or token, a key of its own, a request after the window or after
// a failure. The ids come in a 103 Early Hints before the answer; the
// store's clock measures the window.
func TestChatRepeatsAreOneJob(t *testing.T) {
	storekit.Each(t, func(t *testing.T, db storekit.DB) {
		clock := testkit.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
		e := setupStore(t, db.Open(t, jobs.Options{Now: clock.Now}))
		ann, bob := e.token("acme", "ann", jobs.RoleMember), e.token("acme", "bob", jobs.RoleMember)
		annElsewhere := e.token("acme", "ann", jobs.RoleMember) // another program of hers
		const path = "/v1/chat/completions"
		early := []string{headerEarly, "1"}
		with := func(h ...string) []string { return append(h, early...) }

		// The SDK's first attempt; its job runs until the test ends it.
		first := e.start(path, ann, chatBody, with(headerRetryCount, "0")...)
		pid, jid := first.ids()
		if j := e.claimNext(); j.ID != jid || j.PromptID != pid {
			t.Fatalf("claimed %s of %s; the 103 named %s of %s", j.ID, j.PromptID, jid, pid)
		}
		// Its retries join it, plain or streamed.
		retry := e.start(path, ann, chatBody, with(headerRetryCount, "1")...)
		if gp, gj := retry.ids(); gp != pid || gj != jid {
			t.Errorf("an SDK retry while the job runs: prompt %s job %s, want %s %s", gp, gj, pid, jid)
		}
		s := e.openChatStream(strings.Replace(chatBody, `{"model"`, `{"stream":true,"model"`, 1),
			"Authorization", "Bearer "+ann, headerRetryCount, "1")
		if s.res.Header.Get(headerJobID) != jid {
			t.Errorf("a streamed retry: job %s, want %s", s.res.Header.Get(headerJobID), jid)
		}
		// Every other request is a job of its own.
		seen := map[string]bool{jid: true}
		others := map[string]*pending{}
		for _, o := range []struct {
			what, token, body string
			headers           []string
		}{
			{"no retry header", ann, chatBody, early},
			{"another SDK first call", ann, chatBody, with(headerRetryCount, "0")},
			{"the same, reformatted", ann, strings.ReplaceAll(chatBody, ",", ", "), early},
			{"another body", ann, strings.Replace(chatBody, "Say hi", "Say bye", 1), with(headerRetryCount, "1")},
			{"another caller", bob, chatBody, with(headerRetryCount, "1")},
			{"another token", annElsewhere, chatBody, with(headerRetryCount, "1")},
			{"its own key", ann, chatBody, with("Idempotency-Key", "k-1")},
		} {
			p := e.start(path, o.token, o.body, o.headers...)
			if _, gj := p.ids(); seen[gj] {
				t.Errorf("%s: job %s, want a job of its own", o.what, gj)
			} else {
				seen[gj] = true
			}
			others[o.what] = p
		}
		if n := e.jobCount(); n != 8 {
			t.Errorf("%d jobs, want 8", n)
		}

		// One answer for the first attempt and its retries.
		clock.Advance(time.Second)
		e.succeed(jobs.Job{ID: jid}, jobs.SucceedParams{Answer: jobs.Answer{Output: "Hi!", Model: "m"}})
		completionOf(t, "the first request", first.answer(), pid, jid)
		completionOf(t, "its retry", retry.answer(), pid, jid)
		if data := s.rest(); len(data) == 0 || !strings.Contains(data[0], `"chatcmpl-`+jid+`"`) {
			t.Errorf("the streamed retry: %q", data)
		}
		for range others {
			e.succeed(e.claimNext(), jobs.SucceedParams{Answer: jobs.Answer{Output: "other", Model: "m"}})
		}
		for what, p := range others {
			if r := p.answer(); r.code != 200 || r.header.Get(headerJobID) == jid {
				t.Errorf("%s: %d %v", what, r.code, r.header)
			}
		}

		// Finished: a retry is answered by the job up to the end of the
		// window (measured from when the job finished).
		hey := strings.Replace(chatBody, "Say hi", "Say hey", 1)
		call := e.start(path, ann, hey, with(headerRetryCount, "0")...)
		hp, hj := call.ids()
		e.succeed(e.claimNext(), jobs.SucceedParams{Answer: jobs.Answer{Output: "Hey!", Model: "m"}})
		completionOf(t, "a call", call.answer(), hp, hj)
		clock.Advance(DefaultRepeatWindow - time.Microsecond)
		completionOf(t, "its retry within the window", e.call("POST", path, ann, hey, headerRetryCount, "2"), hp, hj)
		// From the end of the window on: a new job.
		clock.Advance(time.Microsecond)
		later := e.start(path, ann, hey, with(headerRetryCount, "1")...)
		lp, lj := later.ids()
		if lp == hp || lj == hj {
			t.Fatalf("a retry after the window found the old job %s", lj)
		}
		e.succeed(e.claimNext(), jobs.SucceedParams{Answer: jobs.Answer{Output: "Hey again!", Model: "m"}})
		completionOf(t, "a retry after the window", later.answer(), lp, lj)
		// A retry after a failure runs again: the job released the key.
		failing := e.start(path, ann, hey, with(headerRetryCount, "0")...)
		fp, fj := failing.ids()
		e.fail(e.claimNext(), jobs.KindProvider5xx, "HTTP 503")
		failing.answer()
		again := e.start(path, ann, hey, with(headerRetryCount, "2")...)
		if ap, aj := again.ids(); ap == fp || aj == fj {
			t.Errorf("a retry after a failure found the failed job %s", aj)
		}
		e.succeed(e.claimNext(), jobs.SucceedParams{Answer: jobs.Answer{Output: "Hi after all!", Model: "m"}})
		again.answer()
		if n := e.jobCount(); n != 12 {
			t.Errorf("%d jobs, want 12", n)
		}
	})
}

// TestChatRepeatsOff: with a negative RepeatWindow, the same request is
// a job each time; an SDK's retry too.
func TestChatRepeatsOff(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.RepeatWindow = -1 })
	a := e.start("/v1/chat/completions", "", chatBody, headerEarly, "1")
	b := e.start("/v1/chat/completions", "", chatBody, headerEarly, "true", headerRetryCount, "1")
	if _, ja := a.ids(); ja == "" {
		t.Fatal("no job id")
	} else if _, jb := b.ids(); jb == ja {
		t.Errorf("the same job %s with repeats off", ja)
	}
	e.succeed(e.claimNext(), jobs.SucceedParams{Answer: jobs.Answer{Output: "1", Model: "m"}})
	e.succeed(e.claimNext(), jobs.SucceedParams{Answer: jobs.Answer{Output: "2", Model: "m"}})
	for _, p := range []*pending{a, b} {
		if r := p.answer(); r.code != 200 {
			t.Errorf("%d %s", r.code, r.body)
		}
	}
}

// TestEarlyHintsOnRequestOnly: without X-Promptkit-Early-Hints nothing
// comes before the answer (Python's http.client would take a 103 for
// it); the answer always carries the ids.
func TestEarlyHintsOnRequestOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := e.start("/v1/chat/completions", "", chatBody, headerEarly, "0")
	j := e.claimNext()
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "Hi!", Model: "m"}})
	completionOf(t, "the answer", p.answer(), j.PromptID, j.ID)
	if len(p.hints) != 0 {
		t.Errorf("a 103 without being asked: %v", <-p.hints)
	}
}

// TestSubmitIDsBeforeTheWait: POST /v1/prompts?wait= sends the ids in a
// 103 when asked, and in the headers of every answer. The same
// submission twice is two prompts: submissions are never coalesced
// (their answer comes at once; Idempotency-Key is theirs).
func TestSubmitIDsBeforeTheWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := e.start("/v1/prompts?wait=30s", "", `{"text":"hi"}`, headerEarly, "1")
	pid, jid := p.ids()
	j := e.claimNext()
	if j.ID != jid || j.PromptID != pid {
		t.Fatalf("claimed %s of %s; the 103 named %s of %s", j.ID, j.PromptID, jid, pid)
	}
	e.succeed(j, jobs.SucceedParams{Answer: jobs.Answer{Output: "hello", Model: "m"}})
	r := p.answer()
	var v promptView
	r.decode(t, &v)
	if r.code != 200 || v.Prompt.ID != pid || r.header.Get(headerPromptID) != pid || r.header.Get(headerJobID) != jid {
		t.Errorf("answer: %d %v %s", r.code, r.header, r.body)
	}
	again := e.call("POST", "/v1/prompts", "", `{"text":"hi"}`)
	var s submitted
	again.decode(t, &s)
	if again.code != 202 || s.PromptID == pid || again.header.Get(headerPromptID) != s.PromptID || again.header.Get(headerJobID) != s.JobID {
		t.Errorf("the same submission again: %d %v %s", again.code, again.header, again.body)
	}
}
