package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs/worker"
)

// A request that waits for its answer (a chat completion, a submission
// with ?wait=) runs at once in a free slot of the server's own worker,
// claimed as it is stored; one that does not wait is queued and claimed
// from the queue.
func TestFastPath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var mu sync.Mutex
	direct := map[string]bool{} // job → claimed directly
	e.runWorker(func(c *worker.Config) {
		c.Observe = func(ev worker.JobEvent) {
			if ev.Claimed {
				mu.Lock()
				direct[ev.Job.ID] = ev.Direct
				mu.Unlock()
			}
		}
	})
	claimedDirectly := func(jobID string) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		d, ok := direct[jobID]
		return d, ok
	}

	// First a submission nobody waits for: it is queued and claimed from
	// the queue. Its claim also says the worker's loop is running, so the
	// requests below find its slots (a request that comes before, while
	// serve starts, is queued like this one).
	queued := e.call("POST", "/v1/prompts", "", `{"text":"later"}`)
	if queued.code != 202 {
		t.Fatalf("submission: %d %s", queued.code, queued.body)
	}
	id := queued.header.Get(headerJobID)
	if !testkit.Until(context.Background(), time.Minute, func() bool { _, ok := claimedDirectly(id); return ok }, e.st.Notifier()) {
		t.Fatal("the queued job was never claimed")
	}
	if d, _ := claimedDirectly(id); d {
		t.Error("a submission nobody waits for was claimed directly")
	}
	chat := e.call("POST", "/v1/chat/completions", "", chatBody)
	if chat.code != 200 || !strings.Contains(string(chat.body), `"chat.completion"`) {
		t.Fatalf("chat completion: %d %s", chat.code, chat.body)
	}
	if d, ok := claimedDirectly(chat.header.Get(headerJobID)); !ok || !d {
		t.Errorf("chat completion's job claimed directly: %v (seen %v)", d, ok)
	}
	waited := e.call("POST", "/v1/prompts?wait=30s", "", `{"text":"now"}`)
	if waited.code != 200 {
		t.Fatalf("submission with wait: %d %s", waited.code, waited.body)
	}
	if d, ok := claimedDirectly(waited.header.Get(headerJobID)); !ok || !d {
		t.Errorf("waited submission's job claimed directly: %v (seen %v)", d, ok)
	}
}
