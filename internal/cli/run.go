package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/simulate"
)

const defaultConfigFile = "promptkit.yaml"

func newRunCmd(g *globals) *cobra.Command {
	var (
		promptsDir, promptID, text, profile, model string
		inputs, jsonInputs                         []string
		asJSON                                     bool
		retries                                    int
	)
	cmd := &cobra.Command{
		Use:   "run (--prompt ID [--input k=v]... | --text TEXT)",
		Short: "Run one prompt and print the result",
		Long: `Run one prompt through the engine and print the result.

Without --config, promptkit.yaml in the working directory is used when it
exists; otherwise the built-in simulated backend answers (and says so).`,
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
		dir, name := filepath.Split(path)
		if dir == "" {
			dir = "."
		}
		if cfg, err = promptkit.LoadConfig(os.DirFS(dir), name); err != nil {
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
		prompts, err := promptkit.LoadPrompts(os.DirFS(promptsDir), ".")
		if err != nil {
			return cfg, false, err
		}
		cfg.Prompts = prompts
	}
	return cfg, simulated, nil
}

func printResult(cmd *cobra.Command, res *promptkit.RunResult, simulated, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*promptkit.RunResult
			Simulated bool `json:"simulated,omitempty"`
		}{res, simulated})
	}
	if len(res.Output) > 0 {
		var pretty any
		_ = json.Unmarshal(res.Output, &pretty)
		b, _ := json.MarshalIndent(pretty, "", "  ")
		fmt.Fprintln(out, string(b))
	} else {
		fmt.Fprintln(out, res.Text)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: run %s: validation %s, %d attempt(s), tokens %s\n",
		res.RunID, res.Validation.Status, res.Attempts, tokenSummary(res.Usage))
	for _, d := range res.Validation.Errors {
		fmt.Fprintf(cmd.ErrOrStderr(), "promptkit:   %s\n", d)
	}
	return nil
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
