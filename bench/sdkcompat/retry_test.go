package sdkcompat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/promptkit/promptkit/providertest"
)

// A retry is the same job: a call with a 1 s timeout against a backend
// that holds it ends in the timeout (openai-go does not retry its own
// timeouts, unlike openai-node: compat/node's retry test), the job goes
// on; once it finishes, the same request retried (X-Stainless-Retry-Count
// 1, as the SDK numbers its retries) is answered by it: one job, one
// provider call.
func TestFrontDoorSDKRetriesAreOneJob(t *testing.T) {
	t.Parallel()
	s := startService(t)
	hold := make(chan struct{})
	s.slow.Enqueue(providertest.Response{Hold: hold, Text: "worth the wait"})
	cl := openai.NewClient(
		option.WithBaseURL(s.url+"/v1/"),
		option.WithAPIKey(s.token),
		option.WithRequestTimeout(time.Second),
		option.WithMaxRetries(2),
	)
	p := userChat("slow", "take your time")
	if _, err := cl.Chat.Completions.New(t.Context(), p); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the SDK's tries against a held backend ended with %v, want its timeout", err)
	}
	close(hold)
	var res *http.Response
	c, err := cl.Chat.Completions.New(t.Context(), p, option.WithHeader("X-Stainless-Retry-Count", "1"),
		option.WithRequestTimeout(time.Minute), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "worth the wait" {
		t.Errorf("answer %s", c.RawJSON())
	}
	if n := s.slow.Count(); n != 1 {
		t.Errorf("the backend saw %d calls, want 1", n)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.url+"/v1/prompts", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var page struct {
		Prompts []json.RawMessage `json:"prompts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&page); err != nil || len(page.Prompts) != 1 {
		t.Errorf("%d prompts stored (%v), want 1", len(page.Prompts), err)
	}
}
