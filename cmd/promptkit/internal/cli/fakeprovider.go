package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/providertest"
)

func newFakeProviderCmd() *cobra.Command {
	var (
		addr, retryAfter string
		models           []string
		rate, status     int
		latency          time.Duration
		reasoning        bool
	)
	cmd := &cobra.Command{
		Use:   "fake-provider",
		Short: "Serve an OpenAI-compatible fake provider for local testing",
		Long: `Serve providertest's OpenAI-compatible fake provider at --addr.

It answers POST /v1/chat/completions, POST /v1/embeddings and GET
/v1/models (and /v1/models/{id}); the /v1 prefix is optional. Replies are
generated: when a request carries a JSON Schema response_format (or a
json_object one with a "schema", as vLLM takes it) the reply satisfies the
schema; when it offers function tools the reply calls one; otherwise it is
a short text. "n" up to 8 gets that many choices, each a little different,
and "logprobs": true (with "top_logprobs" up to 20) gets deterministic
log probabilities per word. A request with "stream": true gets the reply as
server-sent chat.completion.chunk events ending in data: [DONE], several
choices interleaved, with a usage chunk when stream_options.include_usage
is true. Requests the fake cannot honour ("n" above 8, audio, image or
audio content parts, tools other than functions, the deprecated
functions) get OpenAI's 400 error naming the parameter; other parameters
(top_k, min_p, guided_json, service_tier, ...) are accepted and ignored.

With --reasoning it answers like a reasoning model behind vLLM's reasoning
parser: each reply carries message.reasoning_content (streamed as
delta.reasoning_content before the content), "system_fingerprint", and
usage with completion_tokens_details.reasoning_tokens and
prompt_tokens_details.cached_tokens. A request's "reasoning_effort" or
"chat_template_kwargs": {"enable_thinking": true} turns reasoning on
without the flag; {"enable_thinking": false} turns it off.

With --status CODE (400 to 599) every chat and embeddings request is
answered CODE with OpenAI's error body, for example 503 "The server is
overloaded", to test a client against a backend that is down; /v1/models
still answers.

Embeddings are deterministic: each input gets a unit vector derived from
a SHA-256 of its text, 16 numbers long unless the request asks for other
"dimensions", as JSON numbers or, with "encoding_format": "base64", as
OpenAI's base64.

/v1/models lists each --model (default: "providertest", and then any model
id is described); replies echo the request's model. With --rate N the
server answers at most N chat and embeddings requests per second and 429
past that, with Retry-After (--retry-after fixes its value).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rate < 0 || latency < 0 {
				return usageError{errors.New("--rate and --latency must not be negative")}
			}
			if status != 0 && (status < 400 || status > 599) {
				return usageError{fmt.Errorf("--status must be from 400 to 599, not %d", status)}
			}
			opts := []providertest.Option{providertest.WithLatency(latency), providertest.WithModels(models...)}
			if rate > 0 {
				opts = append(opts, providertest.WithRateLimit(rate))
			}
			if retryAfter != "" {
				opts = append(opts, providertest.WithRetryAfter(retryAfter))
			}
			if reasoning {
				opts = append(opts, providertest.WithReasoning())
			}
			if status != 0 {
				opts = append(opts, providertest.WithStatus(status))
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: providertest.NewHandler(opts...), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: fake provider listening on http://%s/v1\n", ln.Addr())
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutdown); err != nil {
				return err
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8081", "listen address")
	f.IntVar(&rate, "rate", 0, "requests per second before answering 429 (0: unlimited)")
	f.StringVar(&retryAfter, "retry-after", "", "Retry-After value sent with 429 (default: seconds until capacity)")
	f.DurationVar(&latency, "latency", 0, "delay before every reply")
	f.StringArrayVar(&models, "model", nil, "model to list at /v1/models (repeatable; default: providertest)")
	f.BoolVar(&reasoning, "reasoning", false, "answer like a reasoning model: reasoning_content beside the content")
	f.IntVar(&status, "status", 0, "answer every chat and embeddings request with this HTTP status, 400 to 599 (0: off)")
	return cmd
}
