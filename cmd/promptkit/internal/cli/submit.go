package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// submitLine is one line of a --file JSONL: a submission, as the API
// takes it, and its own idempotency key.
type submitLine struct {
	jobs.Submission
	Key string `json:"idempotency_key"`
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
			if file != "" {
				return withNewStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
					return submitFile(cmd, st, check, file, org, user, asJSON)
				})
			}
			o := jobs.ExecutionOptions{Model: model, PreferProvider: preferProvider}
			if cmd.Flags().Changed("depth") {
				o.Depth = &depth
			}
			p, err := jobs.EnqueueParams{
				OrgID: org, CreatedBy: user, Text: text, Profile: profile, ParentID: parent,
				Priority: &priority, MaxAttempts: maxAttempts, ExecutionOptions: o,
				AvailableAt: at, DependsOn: dependsOn, IdempotencyKey: key,
			}.Normalize()
			// Checked before the database is opened: a refused submission
			// leaves nothing behind, not even a new database file.
			if err == nil {
				err = check(cmd.Context(), p)
			}
			if err != nil {
				return usageError{err}
			}
			return withNewStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
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
	f.StringVar(&file, "file", "", "JSONL file of prompts, one object per line: text or prompt+inputs, and priority, profile, parent_id, depends_on, scheduled_for, max_attempts, execution_options, idempotency_key")
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

// waitJob follows a job until it is terminal (jobs.Await, woken by the
// store's notifications and a 250 ms poll) and prints the answer or the
// error. A read failing while the job is still queued is retried at the
// next wake, saying so once: the caller would otherwise submit again.
func waitJob(cmd *cobra.Command, st jobs.Store, id string, asJSON bool) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	failing := false
	j, err := jobs.Await(ctx, wakes(ctx, st.Notifier(), 250*time.Millisecond), nil, func(ctx context.Context) (jobs.Job, bool, error) {
		j, err := st.GetJob(ctx, "", id)
		switch {
		case err == nil:
			if failing {
				fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: reading job %s again\n", id)
				failing = false
			}
			return j, j.State.Terminal(), nil
		case errors.Is(err, jobs.ErrNotFound) || ctx.Err() != nil:
			return j, false, err
		}
		if !failing {
			fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: reading job %s failed (%s); still waiting, retrying\n", id, oneLine(err))
		}
		failing = true
		return j, false, nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		d, err := jobs.LoadJobDetails(ctx, st, "", id)
		if err != nil {
			return err
		}
		if err := printJSON(cmd.OutOrStdout(), d); err != nil {
			return err
		}
	}
	if j.State != jobs.Succeeded {
		return errors.New(jobOutcome(j))
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

// wakes is a wake channel for jobs.Await: the store's notifications (n)
// and, since they are hints, a poll every interval. Its goroutine ends
// with ctx.
func wakes(ctx context.Context, n jobs.Notifier, every time.Duration) <-chan struct{} {
	out := make(chan struct{}, 1)
	notify := n.Notify(ctx)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, open := <-notify:
				if !open {
					notify = nil
				}
			case <-t.C:
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

// newSubmitCheck is the admission check of this configuration's engine
// (see worker.Check), as serve applies it to the API.
func newSubmitCheck(g *globals) (jobs.CheckFunc, error) {
	// The configuration a worker would run the job with must load, as
	// serve and worker require: otherwise nothing could run it.
	cfg, _, err := loadConfig(g.config, "")
	if err != nil {
		return nil, usageError{err}
	}
	eng, err := promptkit.New(cfg)
	if err != nil {
		return nil, usageError{err}
	}
	return func(ctx context.Context, p jobs.EnqueueParams) error {
		return worker.Check(ctx, eng, p)
	}, nil
}

// submitFile enqueues a JSONL file in two passes: the first checks every
// line (a bad line stores nothing) and fingerprints the file, the second
// stores the lines in batches, each with an idempotency key derived from
// the file's content and the line number (unless the line has its own).
// Running the same file again after a failure stores only the lines
// still missing; it never duplicates one.
func submitFile(cmd *cobra.Command, st jobs.Store, check jobs.CheckFunc, path, org, user string, asJSON bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	digest := sha256.New()
	total := 0
	if err := eachLine(io.TeeReader(f, digest), path, org, user, func(lineNo int, p jobs.EnqueueParams) error {
		total++
		if err := check(cmd.Context(), p); err != nil {
			return fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	fileKey := hex.EncodeToString(digest.Sum(nil)[:16])

	var batch []jobs.EnqueueParams
	var lines []int // batch's line numbers
	done, added := 0, 0
	out := cmd.OutOrStdout()
	progress := func() { fmt.Fprintf(cmd.ErrOrStderr(), "\r%s", bar(done, total, 30)) }
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := st.EnqueueBatch(cmd.Context(), batch)
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr())
			return fmt.Errorf("%d of %d lines are stored; running the same command again stores the rest, never a line twice: %w", done, total, err)
		}
		for i, r := range res {
			if !r.Existing {
				added++
			}
			if asJSON {
				_ = json.NewEncoder(out).Encode(map[string]any{"line": lines[i], "prompt_id": r.PromptID, "job_id": r.JobID, "state": r.State, "existing": r.Existing})
			} else {
				fmt.Fprintf(out, "line %d: prompt %s job %s %s\n", lines[i], r.PromptID, r.JobID, r.State)
			}
		}
		done += len(batch)
		batch, lines = batch[:0], lines[:0]
		progress()
		return nil
	}
	err = eachLine(f, path, org, user, func(lineNo int, p jobs.EnqueueParams) error {
		if p.IdempotencyKey == "" {
			p.IdempotencyKey = fmt.Sprintf("file-%s-%d", fileKey, lineNo)
		}
		batch, lines = append(batch, p), append(lines, lineNo)
		if len(batch) == 500 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr())
	msg := fmt.Sprintf("promptkit: queued %d prompts", added)
	if added < total {
		msg += fmt.Sprintf(" (%d lines were already stored by an earlier run of this file)", total-added)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), msg)
	return nil
}

// eachLine decodes the JSONL prompt lines of r, calling fn with each
// line's number (from 1) and enqueue parameters; it stops at fn's first
// error. Decoding errors name the line.
func eachLine(r io.Reader, path, org, user string, fn func(lineNo int, p jobs.EnqueueParams) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l submitLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return fmt.Errorf("%s:%d: not a valid prompt line (%s)", path, lineNo, jsonReason(err))
		}
		p, err := l.Params()
		if err == nil {
			// The line's own key is checked with the rest (a repeat
			// normalization only checks what is cheap to check).
			p.OrgID, p.CreatedBy, p.IdempotencyKey = org, user, l.Key
			p, err = p.Normalize()
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
		if err := fn(lineNo, p); err != nil {
			return err
		}
	}
	return sc.Err()
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
