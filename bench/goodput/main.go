// Command goodput measures how many of n calls succeed, and how long they
// take, when c callers share a provider that allows only rate requests per
// second (a providertest server answering 429 with Retry-After: 1 past its
// limit). It compares promptkit configurations — and the OpenAI Go SDK with
// its default retries — in one process, interleaving the configurations
// round-robin so machine noise spreads over all of them.
//
//	cd bench && go run ./goodput -runs 3
//
// Everything listens and dials on loopback only, and every run has a
// deadline, so the program always ends by itself.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/providertest"
)

// caller performs one call against baseURL; a nil error is a success.
type caller func(ctx context.Context, i int) error

// config is one way of calling the provider under test.
type config struct {
	Name string
	// setup builds the caller for one run; client is a fresh per-run HTTP
	// client, so no run inherits another's connections.
	setup func(baseURL string, client *http.Client, c int) (caller, error)
}

// result is one run of one configuration.
type result struct {
	Config      string  `json:"config"`
	Run         int     `json:"run"`
	Successes   int     `json:"successes"`
	Failures    int     `json:"failures"`
	Calls       int     `json:"provider_calls"`
	RateLimited int     `json:"rate_limited"`
	WallSeconds float64 `json:"wall_seconds"`
	FirstError  string  `json:"first_error,omitempty"`
}

// summary aggregates the runs of one configuration.
type summary struct {
	Config            string   `json:"config"`
	Runs              int      `json:"runs"`
	Successes         float64  `json:"successes_median"`
	Failures          float64  `json:"failures_median"`
	Calls             float64  `json:"provider_calls_median"`
	RateLimited       float64  `json:"rate_limited_median"`
	WallMin           float64  `json:"wall_seconds_min"`
	WallMedian        float64  `json:"wall_seconds_median"`
	WallMax           float64  `json:"wall_seconds_max"`
	WallOverIdeal     float64  `json:"wall_over_ideal_median"`
	FailurePercentage float64  `json:"failure_percent_median"`
	Results           []result `json:"results"`
}

func main() {
	n := flag.Int("n", 1000, "calls per run")
	c := flag.Int("c", 64, "concurrent callers")
	rate := flag.Int("rate", 100, "provider limit, requests per second")
	runs := flag.Int("runs", 3, "runs per configuration, interleaved round-robin")
	sdk := flag.Bool("sdk", true, "include the OpenAI Go SDK with its default retries")
	asJSON := flag.Bool("json", false, "print JSON instead of a markdown table")
	deadline := flag.Duration("deadline", 5*time.Minute, "upper bound on one run")
	only := flag.String("only", "", "run only the configurations whose name contains this")
	flag.Parse()
	if *n <= 0 || *c <= 0 || *rate <= 0 || *runs <= 0 {
		fmt.Fprintln(os.Stderr, "goodput: -n, -c, -rate and -runs must be positive")
		os.Exit(2)
	}

	configs := []config{
		{"promptkit, retries off", engineConfig(ptr(0), false, 0)},
		{"promptkit, default retries (2), no backend-wide pause", engineConfig(nil, false, 0)},
		{"promptkit, default retries + backend-wide pause", engineConfig(nil, true, 0)},
		{fmt.Sprintf("promptkit, default retries + pause + requests_per_second %d", *rate), engineConfig(nil, true, float64(*rate))},
	}
	if *sdk {
		configs = append(configs, config{"openai-go v3.102.0, default retries (2)", sdkConfig})
	}
	if *only != "" {
		configs = slices.DeleteFunc(configs, func(c config) bool { return !strings.Contains(c.Name, *only) })
	}

	ideal := float64(*n) / float64(*rate)
	byConfig := make([][]result, len(configs))
	for r := 1; r <= *runs; r++ {
		for i, cf := range configs {
			res, err := runOnce(cf, *n, *c, *rate, *deadline)
			if err != nil {
				fmt.Fprintf(os.Stderr, "goodput: %s: %v\n", cf.Name, err)
				os.Exit(1)
			}
			res.Run = r
			byConfig[i] = append(byConfig[i], res)
			fmt.Fprintf(os.Stderr, "run %d/%d  %-62s ok %4d  fail %4d  calls %5d  429s %5d  %6.2fs\n",
				r, *runs, cf.Name, res.Successes, res.Failures, res.Calls, res.RateLimited, res.WallSeconds)
		}
	}

	sums := make([]summary, len(configs))
	for i, cf := range configs {
		sums[i] = summarize(cf.Name, byConfig[i], ideal, *n)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{
			"n": *n, "concurrency": *c, "rate": *rate, "runs": *runs,
			"ideal_seconds": ideal, "cores": runtime.NumCPU(), "go": runtime.Version(),
			"configs": sums,
		})
		return
	}
	fmt.Printf("%d calls, concurrency %d, provider limit %d req/s (Retry-After: 1), ideal %.1f s; %d runs each, %d cores, %s\n\n",
		*n, *c, *rate, ideal, *runs, runtime.NumCPU(), runtime.Version())
	fmt.Println("| configuration | successes | failures | provider calls | 429s | wall s min | median | max | wall / ideal |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, s := range sums {
		fmt.Printf("| %s | %g | %g (%.1f %%) | %g | %g | %.2f | %.2f | %.2f | %.2f |\n",
			s.Config, s.Successes, s.Failures, s.FailurePercentage, s.Calls, s.RateLimited,
			s.WallMin, s.WallMedian, s.WallMax, s.WallOverIdeal)
	}
	for _, s := range sums {
		for _, r := range s.Results {
			if r.FirstError != "" {
				fmt.Printf("\nfirst error, %s run %d: %s", s.Config, r.Run, r.FirstError)
			}
		}
	}
	fmt.Println()
}

// runOnce starts a fresh rate-limited provider, so every run begins with
// an unused window, and makes n calls with c workers.
func runOnce(cf config, n, c, rate int, deadline time.Duration) (result, error) {
	srv := providertest.NewServer(
		providertest.WithRateLimit(rate),
		providertest.WithRetryAfter("1"),
		providertest.WithMaxRecorded(1),
	)
	defer srv.Close()
	// Keep up to c idle connections: the default transport keeps 2, and
	// the resulting connection churn would fill the loopback port range
	// with TIME_WAIT sockets over a long run. Both promptkit and the SDK
	// get the same kind of client.
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	call, err := cf.setup(srv.URL, &http.Client{Transport: tr}, c)
	if err != nil {
		return result{}, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var next, ok, fail atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := call(ctx, i); err != nil {
					fail.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if ctx.Err() != nil {
		return result{}, fmt.Errorf("run exceeded -deadline %v", deadline)
	}
	st := srv.Stats()
	res := result{
		Config:      cf.Name,
		Successes:   int(ok.Load()),
		Failures:    int(fail.Load()),
		Calls:       st.Requests,
		RateLimited: st.RateLimited,
		WallSeconds: wall.Seconds(),
	}
	if s, _ := firstErr.Load().(string); s != "" {
		res.FirstError = s
	}
	return res, nil
}

// engineConfig returns a promptkit configuration. MaxActive is set to the
// caller concurrency c: it never binds (each of the c runs has at most one
// attempt in flight), so the numbers reflect the retry, pause and pacing
// policy rather than permit queueing, as with an unlimited backend.
func engineConfig(retries *int, pause bool, rps float64) func(string, *http.Client, int) (caller, error) {
	return func(baseURL string, client *http.Client, c int) (caller, error) {
		eng, err := promptkit.New(promptkit.Config{
			Backends: []promptkit.Backend{{
				ID: "limited", BaseURL: baseURL, MaxActive: c, RequestsPerSecond: rps, PauseOnRetryAfter: &pause,
			}},
			Profiles:         []promptkit.Profile{{ID: "default", Backend: "limited", Model: "m"}},
			HTTPClient:       client,
			TransientRetries: retries,
		})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, i int) error {
			res, err := eng.Run(ctx, promptkit.RunRequest{Text: fmt.Sprintf("Say hello to caller %d.", i)})
			if err == nil && res.Text == "" {
				err = errors.New("empty reply")
			}
			return err
		}, nil
	}
}

// sdkConfig calls the same server through the OpenAI Go SDK with its
// default retry policy (2 retries, Retry-After honoured, no shared pause).
func sdkConfig(baseURL string, client *http.Client, _ int) (caller, error) {
	cl := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("x"), option.WithHTTPClient(client))
	return func(ctx context.Context, i int) error {
		res, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Say hello to caller %d.", i))},
		})
		if err == nil && (len(res.Choices) == 0 || res.Choices[0].Message.Content == "") {
			err = errors.New("empty reply")
		}
		return err
	}, nil
}

func summarize(name string, rs []result, ideal float64, n int) summary {
	col := func(f func(result) float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = f(r)
		}
		slices.Sort(out)
		return out
	}
	wall := col(func(r result) float64 { return r.WallSeconds })
	fails := median(col(func(r result) float64 { return float64(r.Failures) }))
	return summary{
		Config:            name,
		Runs:              len(rs),
		Successes:         median(col(func(r result) float64 { return float64(r.Successes) })),
		Failures:          fails,
		Calls:             median(col(func(r result) float64 { return float64(r.Calls) })),
		RateLimited:       median(col(func(r result) float64 { return float64(r.RateLimited) })),
		WallMin:           wall[0],
		WallMedian:        median(wall),
		WallMax:           wall[len(wall)-1],
		WallOverIdeal:     median(wall) / ideal,
		FailurePercentage: 100 * fails / float64(n),
		Results:           rs,
	}
}

// median of sorted values; the mean of the middle two for an even count.
func median(sorted []float64) float64 {
	k := len(sorted)
	if k%2 == 1 {
		return sorted[k/2]
	}
	return (sorted[k/2-1] + sorted[k/2]) / 2
}

func ptr[T any](v T) *T { return &v }
