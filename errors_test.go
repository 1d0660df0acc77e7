package promptkit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// TestProviderErrorRedaction: a provider error body carrying a marker and
// the API key never reaches the error text, %#v or %+v; the key is redacted
// even from Detail.
func TestProviderErrorRedaction(t *testing.T) {
	const (
		marker = "PROVIDER-MARKER-9f3"
		key    = "sk-test-KEY-4b1d2c"
		env    = "PROMPTKIT_TEST_REDACTION_KEY"
	)
	t.Setenv(env, key)
	b := setup(t, setupOpts{apiKeyEnv: env})
	body := fmt.Sprintf(`{"error":{"message":"%s: bad key %s","type":"invalid_request_error","code":"bad"}}`, marker, key)
	b.srv.Enqueue(providertest.Response{Status: 400, Body: []byte(body)})

	_, err := b.eng.Run(context.Background(), summarize("hello"))
	if err == nil {
		t.Fatal("want error")
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%#v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%v", err)} {
		if strings.Contains(s, marker) || strings.Contains(s, key) {
			t.Fatalf("error text leaks provider text or key: %s", s)
		}
	}
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.StatusCode() != 400 || ge.BackendID() != "local" {
		t.Fatalf("errors.As GenerationError: %v %#v", err, ge)
	}
	if !errors.Is(err, promptkit.ErrLLMGenerate) {
		t.Fatalf("%v does not match ErrLLMGenerate", err)
	}
	if !strings.Contains(ge.Detail(), marker) || strings.Contains(ge.Detail(), key) || !strings.Contains(ge.Detail(), "[REDACTED]") {
		t.Fatalf("Detail = %q: want provider text with the key redacted", ge.Detail())
	}
	if got := b.srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+key {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestGenerationErrorIdentities(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		reply providertest.Response
		want  []error
	}{
		{"server error", providertest.Status(503), []error{promptkit.ErrLLMGenerate}},
		{"malformed body", providertest.Malformed(), []error{promptkit.ErrLLMGenerate, promptkit.ErrMalformedResponse}},
		{"missing choices", providertest.MissingChoices(), []error{promptkit.ErrLLMGenerate, promptkit.ErrMalformedResponse}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			zero := 0 // one attempt: this test is about identities, not retries
			b := setup(t, setupOpts{retries: &zero})
			b.srv.Enqueue(c.reply)
			res, err := b.eng.Run(context.Background(), summarize("x"))
			if res != nil {
				t.Fatalf("partial result on error: %+v", res)
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Errorf("%v does not match %v", err, w)
				}
			}
		})
	}
}

func TestTransportError(t *testing.T) {
	t.Parallel()
	srv := providertest.NewServer()
	url := srv.URL + "/TRANSPORT-MARKER"
	srv.Close() // connection refused from now on
	eng, err := promptkit.New(promptkit.Config{
		Backends: []promptkit.Backend{{ID: "gone", BaseURL: url}},
		Profiles: []promptkit.Profile{{ID: "p", Backend: "gone", Model: "m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Run(context.Background(), promptkit.RunRequest{Text: "x"})
	if !errors.Is(err, promptkit.ErrTransport) || !errors.Is(err, promptkit.ErrLLMGenerate) {
		t.Fatalf("err = %v, want ErrTransport and ErrLLMGenerate", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error does not say what failed: %v", err)
	}
	if strings.Contains(err.Error(), "TRANSPORT-MARKER") || strings.Contains(fmt.Sprintf("%#v", err), "TRANSPORT-MARKER") {
		t.Fatalf("error leaks the URL: %v", err)
	}
}

func TestMissingCredential(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{apiKeyEnv: "PROMPTKIT_TEST_DEFINITELY_UNSET"})
	_, err := b.eng.Run(context.Background(), summarize("x"))
	if !errors.Is(err, promptkit.ErrInvalidRequest) || !strings.Contains(err.Error(), "PROMPTKIT_TEST_DEFINITELY_UNSET") {
		t.Fatalf("err = %v", err)
	}
	if b.srv.Count() != 0 {
		t.Fatal("request sent without its credential")
	}
}

func TestCallerCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	hold := make(chan struct{})
	defer close(hold)
	b.srv.Enqueue(providertest.Response{Hold: hold})
	errc := make(chan error, 1)
	go func() {
		_, err := b.eng.Run(ctx, promptkit.RunRequest{Text: "x"})
		errc <- err
	}()
	if err := b.srv.WaitArrivals(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, promptkit.ErrTransport) {
		t.Fatalf("err = %v, want context.Canceled through ErrTransport", err)
	}
}

// fakeClient is an injected LLMClient.
type fakeClient struct {
	resp  *promptkit.GenerateResponse
	err   error
	calls int
	got   []promptkit.GenerateRequest
}

func (f *fakeClient) Generate(_ context.Context, req promptkit.GenerateRequest) (*promptkit.GenerateResponse, error) {
	f.calls++
	f.got = append(f.got, req)
	return f.resp, f.err
}

var errMine = errors.New("my client's own error")

func TestInjectedClient(t *testing.T) {
	t.Parallel()
	newEngine := func(c promptkit.LLMClient) *promptkit.Engine {
		eng, err := promptkit.New(promptkit.Config{
			LLMClient: c,
			Profiles:  []promptkit.Profile{{ID: "p", Model: "m"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	ctx := context.Background()

	ok := &fakeClient{resp: &promptkit.GenerateResponse{Text: "hi", Usage: promptkit.TokenUsage{PromptTokens: 3, CompletionTokens: 1}}}
	res, err := newEngine(ok).Run(ctx, promptkit.RunRequest{Text: "x"})
	if err != nil || res.Text != "hi" || res.Usage.PromptTokens != 3 || ok.calls != 1 {
		t.Fatalf("res = %+v, err = %v, calls = %d", res, err, ok.calls)
	}
	if ok.got[0].Model != "m" || ok.got[0].Messages[0].Content != "x" {
		t.Fatalf("client got %+v", ok.got[0])
	}

	failing := &fakeClient{err: fmt.Errorf("wrapped: %w", errMine)}
	_, err = newEngine(failing).Run(ctx, promptkit.RunRequest{Text: "x"})
	if !errors.Is(err, errMine) || !errors.Is(err, promptkit.ErrLLMGenerate) || errors.Is(err, promptkit.ErrTransport) {
		t.Fatalf("injected error identity lost or guessed: %v", err)
	}
	if failing.calls != 1 {
		t.Fatalf("injected client called %d times", failing.calls)
	}

	status := &fakeClient{err: &http.ProtocolError{ErrorString: "looks like transport"}}
	if _, err = newEngine(status).Run(ctx, promptkit.RunRequest{Text: "x"}); errors.Is(err, promptkit.ErrTransport) {
		t.Fatalf("classified an injected error by resemblance: %v", err)
	}

	nilResp := &fakeClient{}
	if _, err = newEngine(nilResp).Run(ctx, promptkit.RunRequest{Text: "x"}); !errors.Is(err, promptkit.ErrMalformedResponse) {
		t.Fatalf("nil response: %v, want ErrMalformedResponse", err)
	}
}
