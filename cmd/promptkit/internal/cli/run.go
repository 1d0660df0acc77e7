package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/simulate"
	"github.com/promptkit/promptkit/pktype"
)

const defaultConfigFile = "promptkit.yaml"

func newRunCmd(g *globals) *cobra.Command {
	var (
		promptsDir, promptID, text, profile, model string
		inputs, jsonInputs                         []string
		asJSON, verbose                            bool
		retries                                    int
	)
	cmd := &cobra.Command{
		Use:   "run (--prompt ID [--input k=v]... | --text TEXT)",
		Short: "Run one prompt and print the result",
		Long: `Run one prompt through the engine and print the result.

Without --config, promptkit.yaml in the working directory is used when it
exists; otherwise the built-in simulated backend answers (and says so).

Exit codes: 0 the run succeeded (an output cut off by max_tokens without
an output schema is printed with a warning); 1 the run failed (the
provider refused, could not be reached, a bad config, prompt or input);
2 bad flags or arguments; 3 the output does not satisfy the prompt's
output schema (it is still printed, and --json still prints the result).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (promptID == "") == (text == "") {
				return usageError{errors.New("set exactly one of --prompt and --text")}
			}
			in, err := parseInputs(inputs, jsonInputs)
			if err != nil {
				return usageError{err}
			}
			cfg, simulated, err := loadConfig(g.config, promptsDir)
			if err != nil {
				return err
			}
			if simulated {
				fmt.Fprintln(cmd.ErrOrStderr(), "promptkit: "+simulate.Notice)
			}
			eng, err := promptkit.New(cfg)
			if err != nil {
				return err
			}
			req := promptkit.RunRequest{PromptID: promptID, Inputs: in, Text: text, ProfileID: profile, Model: model}
			if cmd.Flags().Changed("transient-retries") {
				req.TransientRetries = &retries
			}
			res, err := eng.Run(cmd.Context(), req)
			if err != nil {
				if verbose {
					return withProviderDetail(err, apiKeys(cfg))
				}
				return err
			}
			return printResult(cmd, res, simulated, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&promptsDir, "prompts", "", "directory of prompt files (overrides the config's prompts)")
	f.StringVar(&promptID, "prompt", "", "ID of the prompt to run")
	f.StringArrayVar(&inputs, "input", nil, "prompt input as key=value (string value); repeatable")
	f.StringArrayVar(&jsonInputs, "input-json", nil, "prompt input as key=JSON; repeatable")
	f.StringVar(&text, "text", "", "ad-hoc prompt text instead of --prompt")
	f.StringVar(&profile, "profile", "", "profile ID (default: the config's default profile)")
	f.StringVar(&model, "model", "", "override the profile's model")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.BoolVar(&verbose, "verbose", false, "on a provider error, also print the provider's message (redacted: API keys and tokens removed; it may echo the prompt)")
	f.IntVar(&retries, "transient-retries", 0, "extra attempts after 429/5xx (0: none; default: the config's transient_retries)")
	return cmd
}

func parseInputs(kv, kvJSON []string) (map[string]any, error) {
	if len(kv)+len(kvJSON) == 0 {
		return nil, nil
	}
	in := map[string]any{}
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--input %q: want key=value", k)
		}
		in[k] = v
	}
	for _, s := range kvJSON {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--input-json %q: want key=JSON", k)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			return nil, fmt.Errorf("--input-json %q: value is not valid JSON", k)
		}
		in[k] = val
	}
	return in, nil
}

// loadConfig loads the config file, or the simulated backend when there is
// none. An explicitly named file must exist.
func loadConfig(path, promptsDir string) (promptkit.Config, bool, error) {
	explicit := path != ""
	if !explicit {
		path = defaultConfigFile
	}
	var cfg promptkit.Config
	simulated := false
	if _, err := os.Stat(path); err != nil {
		if explicit || !errors.Is(err, fs.ErrNotExist) {
			return cfg, false, fmt.Errorf("config %s: %w", path, err)
		}
		cfg, simulated = simulate.Config(), true
	} else {
		// Paths in the file resolve against its folder.
		if cfg, err = promptkit.LoadConfigFile(path); err != nil {
			return cfg, false, err
		}
		if len(cfg.Backends) == 0 {
			sim := simulate.Config()
			cfg.Backends, cfg.HTTPClient, simulated = sim.Backends, sim.HTTPClient, true
			if len(cfg.Profiles) == 0 {
				cfg.Profiles = sim.Profiles
			}
		}
	}
	if promptsDir != "" {
		prompts, err := promptkit.LoadPromptsDir(promptsDir)
		if err != nil {
			return cfg, false, err
		}
		cfg.Prompts = prompts
	}
	return cfg, simulated, nil
}

// exitInvalidOutput is run's exit code for an output that does not
// satisfy the prompt's output schema.
const exitInvalidOutput = 3

// exitError is a failure with its own exit code; Run prints its message
// like any error's.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

func printResult(cmd *cobra.Command, res *promptkit.RunResult, simulated, asJSON bool) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			*promptkit.RunResult
			Simulated bool `json:"simulated,omitempty"`
		}{res, simulated}); err != nil {
			return err
		}
	} else {
		if len(res.Output) > 0 {
			var pretty any
			_ = json.Unmarshal(res.Output, &pretty)
			b, _ := json.MarshalIndent(pretty, "", "  ")
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, res.Text)
		}
		cut := ""
		if res.Truncated {
			cut = fmt.Sprintf(", cut off (finish_reason %q)", res.FinishReason)
		}
		fmt.Fprintf(errOut, "promptkit: run %s: validation %s, %d attempt(s), tokens %s%s\n",
			res.RunID, res.Validation.Status, res.Attempts, tokenSummary(res.Usage), cut)
		for _, d := range res.Validation.Errors {
			fmt.Fprintf(errOut, "promptkit:   %s\n", d)
		}
	}
	problem := res.OutputProblem()
	switch {
	case res.Validation.Status == promptkit.ValidationInvalid:
		return &exitError{code: exitInvalidOutput, msg: fmt.Sprintf("run %s: %s", res.RunID, problem)}
	case problem != "":
		fmt.Fprintf(errOut, "promptkit: warning: run %s: %s\n", res.RunID, problem)
	}
	return nil
}

// withProviderDetail adds a provider's own message to err (run
// --verbose), redacted once more with the configured API keys: a provider
// that echoes the key it was sent must not print it.
func withProviderDetail(err error, keys []string) error {
	var ge *promptkit.GenerationError
	if !errors.As(err, &ge) || ge.Detail() == "" {
		return err
	}
	return &detailError{err: err, detail: pktype.Redact(ge.Detail(), 512, keys...)}
}

// detailError is an error followed by the provider's redacted message.
type detailError struct {
	err    error
	detail string
}

func (e *detailError) Error() string { return e.err.Error() + "; provider said: " + e.detail }
func (e *detailError) Unwrap() error { return e.err }

// apiKeys are the values of the configured backends' API key variables.
func apiKeys(cfg promptkit.Config) []string {
	var keys []string
	for _, b := range cfg.Backends {
		if b.APIKeyEnv == "" {
			continue
		}
		if k := strings.TrimSpace(os.Getenv(b.APIKeyEnv)); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// tokenSummary says "12 prompt + 3 completion = 15", with "unknown" for a
// count the provider did not report.
func tokenSummary(u promptkit.Usage) string {
	count := func(v int, known bool) string {
		if !known {
			return "unknown"
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%s prompt + %s completion = %s", count(u.PromptTokens, u.Known.PromptTokens),
		count(u.CompletionTokens, u.Known.CompletionTokens), count(u.TotalTokens, u.Known.TotalTokens))
}
