package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/server"
)

// submitLine is one line of a --file JSONL.
type submitLine struct {
	Text        string          `json:"text"`
	Prompt      string          `json:"prompt"`
	Inputs      json.RawMessage `json:"inputs"`
	Priority    *int            `json:"priority"`
	Profile     string          `json:"profile"`
	ParentID    string          `json:"parent_id"`
	MaxAttempts int             `json:"max_attempts"`
	Key         string          `json:"idempotency_key"`
	Options     json.RawMessage `json:"execution_options"`
}

func newSubmitCmd(g *globals) *cobra.Command {
	var (
		text, profile, parent, file, org, user, key, dependsOn, scheduled string
		model, preferProvider                                             string
		priority, maxAttempts, depth                                      int
		wait, asJSON                                                      bool
	)
	cmd := &cobra.Command{
		Use:   "submit (--text TEXT | --file prompts.jsonl)",
		Short: "Queue prompts in --database; with --wait, print the answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (text == "") == (file == "") {
				return usageError{errors.New("set exactly one of --text and --file")}
			}
			if priority < 0 || priority > 100 {
				return usageError{errors.New("--priority must be 0–100")}
			}
			at, err := parseFuture(scheduled)
			if err != nil {
				return err
			}
			check, err := newSubmitCheck(g)
			if err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				if file != "" {
					return submitFile(cmd, st, check, file, org, user)
				}
				o := jobs.ExecutionOptions{Model: model, PreferProvider: preferProvider}
				if cmd.Flags().Changed("depth") {
					o.Depth = &depth
				}
				opts := o.JSON()
				p := jobs.EnqueueParams{
					OrgID: org, CreatedBy: user, Text: text, Profile: profile, ParentID: parent,
					Priority: &priority, MaxAttempts: maxAttempts, ExecutionOptions: opts,
					AvailableAt: at, DependsOn: dependsOn, IdempotencyKey: key,
				}
				if err := check(ctx, p); err != nil {
					return usageError{err}
				}
				res, err := st.Enqueue(ctx, p)
				if err != nil {
					return err
				}
				if !wait {
					if asJSON {
						return printJSON(cmd.OutOrStdout(), map[string]any{"prompt_id": res.PromptID, "job_id": res.JobID, "state": res.State})
					}
					fmt.Fprintf(cmd.OutOrStdout(), "prompt %s job %s %s\n", res.PromptID, res.JobID, res.State)
					return nil
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: job %s queued; waiting (a running serve or worker executes it)\n", res.JobID)
				return waitJob(cmd, st, res.JobID, asJSON)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&text, "text", "", "prompt text")
	f.StringVar(&file, "file", "", "JSONL file of prompts ({\"text\":…, \"priority\":…, \"profile\":…, \"parent_id\":…} per line)")
	f.IntVar(&priority, "priority", 50, "0–100, lower runs first")
	f.StringVar(&profile, "profile", "", "engine profile")
	f.StringVar(&model, "model", "", "model instead of the profile's")
	f.StringVar(&preferProvider, "prefer-provider", "", "backend to run on instead of the profile's (it must serve the model)")
	f.IntVar(&depth, "depth", 0, "ancestor prompts sent as history (default: the worker's, 10)")
	f.StringVar(&parent, "parent", "", "parent prompt ID (continues its thread)")
	f.StringVar(&dependsOn, "depends-on", "", "job ID that must succeed first")
	f.StringVar(&scheduled, "scheduled-for", "", "run no earlier than (RFC 3339 or a duration such as 10m)")
	f.IntVar(&maxAttempts, "max-attempts", 3, "job attempts")
	f.StringVar(&org, "org", server.LocalOrg, "org ID (the API's local identity by default)")
	f.StringVar(&user, "user", server.LocalUser, "user ID")
	f.StringVar(&key, "idempotency-key", "", "a repeat with the same key returns the first job")
	f.BoolVar(&wait, "wait", false, "wait for the job to finish and print the answer")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func parseFuture(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageError{fmt.Errorf("--scheduled-for %q: want RFC 3339 or a duration", s)}
}

// waitJob follows a job until it is terminal (notifications, else a
// 250 ms poll) and prints the answer or the error.
func waitJob(cmd *cobra.Command, st jobs.Store, id string, asJSON bool) error {
	ctx := cmd.Context()
	wake := st.Notify(ctx)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		j, err := st.GetJob(ctx, "", id)
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			if asJSON {
				d, err := loadDetails(ctx, st, id)
				if err != nil {
					return err
				}
				if err := printJSON(cmd.OutOrStdout(), d); err != nil {
					return err
				}
			}
			if j.State != jobs.Succeeded {
				return fmt.Errorf("job %s %s: %s %s", j.ID, j.State, j.ErrorKind, j.ErrorMessage)
			}
			if !asJSON {
				r, err := st.GetResponse(ctx, "", j.ResponseID)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), r.Output)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-tick.C:
		}
	}
}

// submitCheck refuses at submission what a worker could not run: the
// store's own rules (jobs.EnqueueParams.Normalize), then what the engine
// of this configuration says about the request (an unknown prompt or
// profile, inputs failing the schema, a backend that does not serve the
// model).
type submitCheck func(ctx context.Context, p jobs.EnqueueParams) error

func newSubmitCheck(g *globals) (submitCheck, error) {
	cfg, _, err := loadConfig(g.config, "")
	if err != nil {
		return nil, err
	}
	eng, err := promptkit.New(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, p jobs.EnqueueParams) error {
		return worker.Check(ctx, eng, p)
	}, nil
}

// submitFile enqueues a JSONL file in batches, with a progress line.
func submitFile(cmd *cobra.Command, st jobs.Store, check submitCheck, path, org, user string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	total, err := countLines(f)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var batch []jobs.EnqueueParams
	done, lineNo := 0, 0
	progress := func() { fmt.Fprintf(cmd.ErrOrStderr(), "\r%s", bar(done, total, 30)) }
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := st.EnqueueBatch(cmd.Context(), batch); err != nil {
			return err
		}
		done += len(batch)
		batch = batch[:0]
		progress()
		return nil
	}
	for sc.Scan() {
		lineNo++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l submitLine
		dec := json.NewDecoder(bytesReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return fmt.Errorf("%s:%d: not a valid prompt line (%s)", path, lineNo, jsonReason(err))
		}
		if (l.Text == "") == (l.Prompt == "") {
			return fmt.Errorf("%s:%d: set exactly one of text and prompt", path, lineNo)
		}
		p := jobs.EnqueueParams{
			OrgID: org, CreatedBy: user, Text: l.Text, PromptRef: l.Prompt, Inputs: l.Inputs, Profile: l.Profile,
			ParentID: l.ParentID, Priority: l.Priority, MaxAttempts: l.MaxAttempts, ExecutionOptions: l.Options, IdempotencyKey: l.Key,
		}
		if err := check(cmd.Context(), p); err != nil {
			return fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
		batch = append(batch, p)
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr())
	fmt.Fprintf(cmd.OutOrStdout(), "queued %d prompts\n", done)
	return nil
}

// bar renders a progress bar such as "[#######.......]  50% 500/1000".
func bar(done, total, width int) string {
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	n := int(frac * float64(width))
	return fmt.Sprintf("[%s%s] %3.0f%% %d/%d", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac, done, total)
}

// countLines counts non-empty lines, for the progress bar.
func countLines(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			n++
		}
	}
	return n, sc.Err()
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// jsonReason describes a decode error without quoting the line.
func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s has the wrong type", te.Field)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "invalid JSON"
}
