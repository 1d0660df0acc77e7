package promptkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

func oneBackend(url string, profiles ...promptkit.Profile) promptkit.Config {
	zero := 0
	return promptkit.Config{
		Backends:         []promptkit.Backend{{ID: "b", BaseURL: url}},
		Profiles:         profiles,
		TransientRetries: &zero,
	}
}

// Naming no profile where no default exists is a bad request; naming one
// that does not exist is ErrProfileNotFound.
func TestNoProfileSelected(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	eng, err := promptkit.New(oneBackend(srv.URL,
		promptkit.Profile{ID: "a", Backend: "b", Model: "m"}, promptkit.Profile{ID: "c", Backend: "b", Model: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	var log eventLog
	_, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
	if !errors.Is(err, promptkit.ErrInvalidRequest) || errors.Is(err, promptkit.ErrProfileNotFound) {
		t.Fatalf("no profile selected: %v, want ErrInvalidRequest only", err)
	}
	if f := lastEvent(t, log.Events()).Failure; f != promptkit.ExecutionFailureInvalidRequest {
		t.Fatalf("finished failure %q, want invalid_request", f)
	}
	_, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x", ProfileID: "nope"})
	if !errors.Is(err, promptkit.ErrProfileNotFound) {
		t.Fatalf("unknown profile: %v, want ErrProfileNotFound", err)
	}
	if srv.Count() != 0 {
		t.Fatal("a refused run reached the provider")
	}
}

// A run whose ID cannot be made ends at once with an error finished event
// whose RunID is empty; nothing is sent.
func TestNoRunIDEndsTheRun(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	noID := func() (string, error) { return "", errors.New("no entropy") }
	eng, err := promptkit.NewWithFailures(oneBackend(srv.URL, promptkit.Profile{ID: "default", Backend: "b", Model: "m"}), noID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var log eventLog
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Observer: log.Observe})
	if err == nil || res != nil {
		t.Fatalf("Run = %v, %v; want an error and no result", res, err)
	}
	var prepLog eventLog
	h, err := eng.PrepareExecution(context.Background(), promptkit.RunRequest{Text: "x", Observer: prepLog.Observe})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := eng.RunPrepared(context.Background(), h); err == nil || res != nil {
		t.Fatalf("RunPrepared = %v, %v; want an error and no result", res, err)
	}
	for name, l := range map[string]*eventLog{"Run": &log, "RunPrepared": &prepLog} {
		evs := l.Events()
		if got := eventKinds(evs); got != "started,finished" {
			t.Errorf("%s events %s, want started,finished", name, got)
		}
		for _, ev := range evs {
			if ev.RunID != "" {
				t.Errorf("%s: %s event has RunID %q", name, ev.Kind, ev.RunID)
			}
		}
		if fin := lastEvent(t, evs); fin.Outcome != promptkit.ExecutionOutcomeError || fin.Attempts != 0 {
			t.Errorf("%s finished = %+v", name, fin)
		}
	}
	if srv.Count() != 0 {
		t.Fatal("a run without an ID reached the provider")
	}
}

// Validation that fails to run is an error, observed as validation, with
// no partial result.
func TestValidationErrorIsObservedWithoutResult(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	cfg := oneBackend(srv.URL, promptkit.Profile{ID: "default", Backend: "b", Model: "m"})
	cfg.Prompts = []promptkit.Prompt{{ID: "p", Template: "say {{.x}}", OutputSchema: []byte(`{"type":"object"}`)}}
	eng, err := promptkit.NewWithFailures(cfg, nil, errors.New("validator broke"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(providertest.Reply(`{"a":1}`))
	var log eventLog
	res, err := eng.Run(context.Background(), promptkit.RunRequest{PromptID: "p", Inputs: map[string]any{"x": "hi"}, Observer: log.Observe})
	if res != nil || !errors.Is(err, promptkit.ErrValidation) {
		t.Fatalf("Run = %v, %v; want no result and ErrValidation", res, err)
	}
	if got := eventKinds(log.Events()); got != "started,attempt,finished" {
		t.Fatalf("events %s", got)
	}
	if fin := lastEvent(t, log.Events()); fin.Failure != promptkit.ExecutionFailureValidation || fin.Outcome != promptkit.ExecutionOutcomeError || fin.Attempts != 1 {
		t.Fatalf("finished = %+v", fin)
	}
}

// RunRequest.Backend runs the profile on another backend that serves its
// model, and nowhere else.
func TestBackendOverride(t *testing.T) {
	t.Parallel()
	main, other := providertest.NewServer(), providertest.NewServer()
	t.Cleanup(main.Close)
	t.Cleanup(other.Close)
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "main", BaseURL: main.URL}, {ID: "other", BaseURL: other.URL}},
		Profiles: []promptkit.Profile{{ID: "default", Backend: "main", Model: "m"}, {ID: "spare", Backend: "other", Model: "m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var log eventLog
	res, err := eng.Run(context.Background(), promptkit.RunRequest{Text: "x", Backend: "other", Observer: log.Observe})
	if err != nil || res.BackendID != "other" || res.ProfileID != "default" || other.Count() != 1 || main.Count() != 0 {
		t.Fatalf("Run = %+v, %v; other saw %d, main %d", res, err, other.Count(), main.Count())
	}
	if ev := lastEvent(t, log.Events()); ev.BackendID != "other" {
		t.Fatalf("finished event backend %q", ev.BackendID)
	}
	plain, err := eng.Prepare(context.Background(), promptkit.RunRequest{Text: "x"})
	if err != nil || plain.PromptHash != res.PromptHash {
		t.Fatalf("the backend changed the prompt hash: %v", err)
	}
	for _, req := range []promptkit.RunRequest{
		{Text: "x", Backend: "other", Model: "m2"}, // no profile uses other with m2
		{Text: "x", Backend: "nope"},
	} {
		if _, err := eng.Run(context.Background(), req); !errors.Is(err, promptkit.ErrInvalidRequest) {
			t.Errorf("%+v: %v, want ErrInvalidRequest", req, err)
		}
	}
	if other.Count() != 1 || main.Count() != 0 {
		t.Fatal("a refused run reached a provider")
	}
}

// No error line says "promptkit:" twice.
func TestErrorStringsDoNotStutter(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	t.Cleanup(srv.Close)
	run := func(cfg func(*promptkit.Config), req promptkit.RunRequest, replies ...providertest.Response) error {
		c := oneBackend(srv.URL, promptkit.Profile{ID: "default", Backend: "b", Model: "m"})
		c.Prompts = []promptkit.Prompt{{ID: "p", Template: "{{.x}}", InputSchema: []byte(`{"required":["x"]}`)}}
		if cfg != nil {
			cfg(&c)
		}
		eng, err := promptkit.New(c)
		if err != nil {
			t.Fatal(err)
		}
		srv.Enqueue(replies...)
		_, err = eng.Run(context.Background(), req)
		return err
	}
	one := 1
	errs := map[string]error{
		"exhausted": run(func(c *promptkit.Config) { c.TransientRetries = &one }, promptkit.RunRequest{Text: "x"},
			providertest.Status(503), providertest.Status(503)),
		"missing credential": run(func(c *promptkit.Config) { c.Backends[0].APIKeyEnv = "PROMPTKIT_TEST_SURELY_UNSET_KEY" }, promptkit.RunRequest{Text: "x"}),
		"prompt not found":   run(nil, promptkit.RunRequest{PromptID: "nope"}),
		"render":             run(nil, promptkit.RunRequest{PromptID: "p"}),
		"malformed":          run(nil, promptkit.RunRequest{Text: "x"}, providertest.Malformed()),
		"injected sentinel": run(func(c *promptkit.Config) {
			c.LLMClient = failingClient{fmt.Errorf("%w: proxy down", promptkit.ErrTransport)}
		}, promptkit.RunRequest{Text: "x"}),
	}
	for name, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if n := strings.Count(err.Error(), "promptkit:"); n > 1 {
			t.Errorf("%s: %q says promptkit: %d times", name, err, n)
		}
	}
}

type failingClient struct{ err error }

func (c failingClient) Generate(context.Context, promptkit.GenerateRequest) (*promptkit.GenerateResponse, error) {
	return nil, c.err
}
