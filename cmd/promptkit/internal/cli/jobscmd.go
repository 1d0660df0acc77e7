package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/pktype"
)

// withStore opens the job database of an existing deployment for one
// command (see globals.databaseName; a missing SQLite file is an error)
// and closes it.
func withStore(cmd *cobra.Command, g *globals, fn func(ctx context.Context, st jobs.Store) error) error {
	dsn, err := g.databaseName()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(ctx, st)
}

// withNewStore is withStore for commands that may start a deployment
// (submit, tokens create): a missing SQLite file is created.
func withNewStore(cmd *cobra.Command, g *globals, fn func(ctx context.Context, st jobs.Store) error) error {
	dsn, err := g.databaseName()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	st, err := openStore(ctx, dsn, jobs.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(ctx, st)
}

func newMigrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the job database's schema migrations",
		Long: `Apply the job database's schema migrations, creating a SQLite file when it
does not exist. serve and worker migrate by themselves when they start; run
migrate ahead of a rollout, or to create a PostgreSQL schema. It says which
migrations it applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn, err := g.databaseName()
			if err != nil {
				return err
			}
			applied, err := migrateStore(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: %s is up to date; no migration to apply\n", displayDB(dsn))
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: %s: applied %d migration(s), %s; now at version %d\n",
				displayDB(dsn), len(applied), versions(applied), applied[len(applied)-1])
			return nil
		},
	}
}

// joinStates lists the job states for help texts.
func joinStates() string {
	var ss []string
	for _, st := range jobs.States() {
		ss = append(ss, string(st))
	}
	return strings.Join(ss, ", ")
}

// versions renders migration versions, e.g. "1–7" or "5".
func versions(vs []int64) string {
	if len(vs) == 1 {
		return fmt.Sprint(vs[0])
	}
	return fmt.Sprintf("%d–%d", vs[0], vs[len(vs)-1])
}

func newJobsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Inspect and operate on the jobs in the job database"}
	cmd.AddCommand(newJobsListCmd(g), newJobsShowCmd(g), newJobsCancelCmd(g), newJobsRetryCmd(g),
		newJobsMetricsCmd(g), newJobsArchiveCmd(g), newJobsReclaimCmd(g))
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return time.Now().Add(-d), nil // "--since 1h" means one hour ago
	}
	return time.Time{}, usageError{fmt.Errorf("--%s %q: want RFC 3339 (2026-12-02T15:04:05Z), a date (2026-12-02) or a duration (1h)", flag, s)}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// filterFlags is the job filter flag set of jobs list, cancel and retry:
// one set, so that a listing shows exactly what a bulk cancel or retry
// with the same flags acts on.
type filterFlags struct {
	state, org, user, profile, backend, since, until, batch string
	minPriority, maxPriority                                int
}

// filterFlagNames are the flags filterFlags registers.
var filterFlagNames = []string{"state", "org", "user", "profile", "backend", "min-priority", "max-priority", "since", "until", "batch"}

func (ff *filterFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&ff.state, "state", "", "only jobs in this state: "+joinStates())
	f.StringVar(&ff.org, "org", "", "only jobs of this org")
	f.StringVar(&ff.user, "user", "", "only jobs created by this user")
	f.StringVar(&ff.profile, "profile", "", "only jobs of prompts with this profile")
	f.StringVar(&ff.backend, "backend", "", "only jobs that made a provider call to this backend")
	f.IntVar(&ff.minPriority, "min-priority", jobs.MinPriority, "only jobs of at least this priority number (0–100)")
	f.IntVar(&ff.maxPriority, "max-priority", jobs.MaxPriority, "only jobs of at most this priority number (0–100)")
	f.StringVar(&ff.since, "since", "", "only jobs created since (RFC 3339, date, or a duration such as 1h)")
	f.StringVar(&ff.until, "until", "", "only jobs created before (RFC 3339, date, or a duration such as 1h: that long ago)")
	f.StringVar(&ff.batch, "batch", "", "only lines of this batch")
}

// set reports whether any filter flag was given.
func (ff *filterFlags) set(cmd *cobra.Command) bool {
	for _, n := range filterFlagNames {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// filter makes the jobs.JobFilter of the flags; a usage error for a value
// the filter refuses.
func (ff *filterFlags) filter(cmd *cobra.Command) (jobs.JobFilter, error) {
	if ff.state != "" && !jobs.State(ff.state).Valid() {
		return jobs.JobFilter{}, usageError{fmt.Errorf("--state %q: want one of %v", ff.state, jobs.States())}
	}
	since, err := parseTime("since", ff.since)
	if err != nil {
		return jobs.JobFilter{}, err
	}
	until, err := parseTime("until", ff.until)
	if err != nil {
		return jobs.JobFilter{}, err
	}
	f := jobs.JobFilter{OrgID: ff.org, CreatedBy: ff.user, State: jobs.State(ff.state), Since: since, Until: until,
		Profile: ff.profile, Backend: ff.backend, BatchID: ff.batch}
	if cmd.Flags().Changed("min-priority") {
		f.MinPriority = &ff.minPriority
	}
	if cmd.Flags().Changed("max-priority") {
		f.MaxPriority = &ff.maxPriority
	}
	if _, err := f.Normalize(); err != nil {
		return jobs.JobFilter{}, usageError{errors.New(jobs.InvalidMessage(err))}
	}
	return f, nil
}

func newJobsListCmd(g *globals) *cobra.Command {
	var ff filterFlags
	var after string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := ff.filter(cmd)
			if err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				page, err := st.ListJobs(ctx, jobs.ListParams{JobFilter: filter, Limit: limit, After: after})
				if errors.Is(err, jobs.ErrInvalid) {
					return usageError{err}
				}
				if err != nil {
					return err
				}
				if page.Next != "" {
					defer fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: more jobs: add --after %s\n", page.Next)
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(page.Jobs))
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tPRIORITY\tATTEMPT\tERROR\tCREATED\tUPDATED")
				for _, j := range page.Jobs {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\n", j.ID, j.State, j.Priority, j.Attempt, j.MaxAttempts,
						orDash(string(j.ErrorKind)), fmtTime(j.CreatedAt), fmtTime(j.UpdatedAt))
				}
				return tw.Flush()
			})
		},
	}
	ff.register(cmd)
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 50, "at most this many jobs")
	f.StringVar(&after, "after", "", "continue a listing: the cursor the previous page printed")
	f.BoolVar(&asJSON, "json", false, "print JSON objects named as the columns")
	return cmd
}

// jobOutcome says how a job that did not succeed ended, in words first:
// "job J failed on attempt 3 of 3: the provider could not be reached
// (transport): <the redacted error>".
func jobOutcome(j jobs.Job) string {
	msg := fmt.Sprintf("job %s %s", j.ID, j.State)
	if j.State == jobs.Failed {
		msg += fmt.Sprintf(" on attempt %d of %d", j.Attempt, j.MaxAttempts)
	}
	if j.ErrorKind != "" {
		msg += fmt.Sprintf(": %s (%s)", j.ErrorKind.Description(), j.ErrorKind)
	}
	if j.ErrorMessage != "" {
		msg += ": " + j.ErrorMessage
	}
	return msg
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newJobsShowCmd(g *globals) *cobra.Command {
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "show JOB_ID",
		Short: "Show a job with its prompt's whole history and the job's events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				d, err := jobs.LoadJobDetails(ctx, st, "", args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), d)
				}
				printDetails(cmd.OutOrStdout(), d, verbose)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the events' data as stored, with any provider detail)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "print the provider's own message under the attempt it answered, when service.keep_provider_detail kept it")
	return cmd
}

func printDetails(w io.Writer, d jobs.JobDetails, verbose bool) {
	j := d.Job
	fmt.Fprintf(w, "job %s  %s  priority %d  attempt %d/%d\n", j.ID, j.State, j.Priority, j.Attempt, j.MaxAttempts)
	fmt.Fprintf(w, "prompt %s  org %s  user %s  created %s\n", j.PromptID, orDash(j.OrgID), orDash(j.CreatedBy), fmtTime(j.CreatedAt))
	if j.ErrorKind != "" {
		fmt.Fprintf(w, "error %s (%s): %s\n", j.ErrorKind, j.ErrorKind.Description(), j.ErrorMessage)
		fmt.Fprintf(w, "what to do: %s\n", j.ErrorKind.Advice())
	}
	fmt.Fprintf(w, "cost %s\n", fmtCost(d.Cost))
	if d.Response != nil {
		tokens := "tokens unknown"
		if u := d.Response.Usage; u.Known.TotalTokens {
			tokens = fmt.Sprintf("%d tokens", u.TotalTokens)
		}
		from := ""
		if b := answeredBy(d.Events); b != "" {
			from = ", from backend " + b
		}
		fmt.Fprintf(w, "answer (%s, %s%s):\n%s\n", orDash(d.Response.Model), tokens, from, d.Response.Output)
	}
	fmt.Fprintln(w, "\nhistory of the prompt:")
	for _, h := range d.History {
		mark := " "
		if h.ID == j.ID {
			mark = "*"
		}
		fmt.Fprintf(w, " %s %s  %-10s attempt %d  %s\n", mark, h.ID, h.State, h.Attempt, orDash(string(h.ErrorKind)))
	}
	fmt.Fprintln(w, "\nevents:")
	for _, e := range d.Events {
		switch e.Type {
		case jobs.EventTransition:
			from := string(e.From)
			if from == "" {
				from = "(new)"
			}
			line := fmt.Sprintf("  #%d %s  %s -> %s  %s", e.Seq, fmtTime(e.At), from, e.To, strings.TrimSpace(string(e.Data)))
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		default:
			data, detail := splitDetail(e)
			fmt.Fprintf(w, "  #%d %s  %s %s\n", e.Seq, fmtTime(e.At), e.Type, strings.TrimSpace(string(data)))
			if verbose && detail != "" {
				fmt.Fprintf(w, "      provider said: %s\n", detail)
			}
		}
	}
}

// answeredBy is the backend of the last attempt that succeeded: the one
// that answered (a model group chooses one per attempt); "" when no
// attempt event says.
func answeredBy(evs []jobs.Event) string {
	for i := len(evs) - 1; i >= 0; i-- {
		var a struct {
			Backend, Outcome string
		}
		if evs[i].Type == jobs.EventAttempt && json.Unmarshal(evs[i].Data, &a) == nil && a.Outcome == "success" {
			return a.Backend
		}
	}
	return ""
}

// splitDetail separates the provider's message an attempt event keeps
// (service.keep_provider_detail) from the rest of its data, keeping the
// order of the other keys, so that only --verbose prints it.
func splitDetail(e jobs.Event) (json.RawMessage, string) {
	dec := json.NewDecoder(strings.NewReader(string(e.Data)))
	if t, err := dec.Token(); e.Type != jobs.EventAttempt || err != nil || t != json.Delim('{') {
		return e.Data, ""
	}
	var rest strings.Builder
	var detail string
	for dec.More() {
		k, err := dec.Token()
		var v json.RawMessage
		if err != nil || dec.Decode(&v) != nil {
			return e.Data, ""
		}
		if k == "detail" && json.Unmarshal(v, &detail) == nil {
			continue
		}
		if rest.Len() > 0 {
			rest.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		rest.Write(key)
		rest.WriteByte(':')
		rest.Write(v)
	}
	if detail == "" {
		return e.Data, ""
	}
	return json.RawMessage("{" + rest.String() + "}"), jobs.ErrorMessage(detail) // printable, whoever wrote it
}

// cliActor is who the CLI says acts in a job's events (CancelParams.By):
// "cli:" and the OS user's name.
func cliActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	by := "cli:" + name
	if len(by) > jobs.MaxActor {
		by = by[:jobs.MaxActor] // a name that long is no use whole either
	}
	return strings.ToValidUTF8(by, "")
}

// bulkAction is what jobs cancel and jobs retry do with filter flags
// instead of a job ID.
type bulkAction struct {
	verb, past string // "cancel", "cancelled"
	count      func(context.Context, jobs.Store, jobs.JobFilter) (int, error)
	run        func(context.Context, jobs.Store, jobs.BulkParams) (jobs.BulkResult, error)
	states     func(jobs.JobFilter) ([]jobs.State, error)
}

// runBulk counts the jobs the filter flags match and, with --yes, acts on
// them (at most limit), printing what it did and the
// bulk action's ID, which every job's event names. Without a filter flag
// it refuses: a bare jobs cancel would otherwise act on every job.
func runBulk(cmd *cobra.Command, g *globals, ff *filterFlags, a bulkAction, yes bool, limit int) error {
	if !ff.set(cmd) {
		return usageError{fmt.Errorf("give a JOB_ID, or filter flags (--%s) to %s every job they match",
			strings.Join(filterFlagNames, ", --"), a.verb)}
	}
	f, err := ff.filter(cmd)
	if err != nil {
		return err
	}
	if _, err := a.states(f); err != nil {
		return usageError{errors.New(jobs.InvalidMessage(err))}
	}
	if limit < 1 || limit > jobs.MaxBulk {
		return usageError{fmt.Errorf("--limit %d: want 1–%d", limit, jobs.MaxBulk)}
	}
	return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
		w := cmd.OutOrStdout()
		if !yes {
			n, err := a.count(ctx, st, f)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%d jobs match; add --yes to %s them\n", n, a.verb)
			return nil
		}
		res, err := a.run(ctx, st, jobs.BulkParams{Filter: f, By: cliActor(), Limit: limit})
		if err == nil || res.Done+res.Skipped > 0 {
			// Also when it stopped part way: what it did stays done.
			fmt.Fprintf(w, "%s %d of %d (%d changed meanwhile); bulk action %s\n", a.past, res.Done, res.Matched, res.Skipped, res.ID)
		}
		if err != nil {
			return err
		}
		if res.Truncated {
			fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: more jobs match than one run acts on (--limit %d); run it again for the rest\n", limit)
		}
		return nil
	})
}

// bulkFlags registers --yes and --limit of a bulk cancel or retry.
func bulkFlags(cmd *cobra.Command, verb string, yes *bool, limit *int) {
	cmd.Flags().BoolVar(yes, "yes", false, "with filter flags: "+verb+" the jobs they match (without it, only count them)")
	cmd.Flags().IntVar(limit, "limit", jobs.MaxBulk, "with filter flags: "+verb+" at most this many jobs, newest first")
}

func newJobsCancelCmd(g *globals) *cobra.Command {
	var ff filterFlags
	var yes bool
	var limit int
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID | cancel FILTER_FLAGS [--yes]",
		Short: "Cancel a queued or running job, or every one matching filter flags",
		Long: `Cancel a queued or running job. A running job's provider call is stopped
within a heartbeat interval and its late result is discarded. A finished job
cannot be cancelled; a superseded one was replaced by a retry: cancel that.

With filter flags instead of a JOB_ID (the flags of jobs list, at least
one), it counts the queued and running jobs they match and says so; with
--yes it cancels them, each in its own transaction with an event naming
you (cli:USER) and the bulk action's ID, and prints how many it cancelled
and how many had finished meanwhile. --state may name queued or running.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return runBulk(cmd, g, &ff, bulkAction{verb: "cancel", past: "cancelled",
					count: jobs.CountCancellable, run: jobs.CancelMatching, states: jobs.CancellableStates}, yes, limit)
			}
			if ff.set(cmd) || cmd.Flags().Changed("limit") {
				return usageError{errors.New("give a JOB_ID or filter flags, not both")}
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				j, err := st.Cancel(ctx, jobs.CancelParams{JobID: args[0], By: cliActor()})
				if err != nil {
					return operationError(ctx, st, "cancel", args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", j.ID, j.State)
				return nil
			})
		},
	}
	ff.register(cmd)
	bulkFlags(cmd, "cancel", &yes, &limit)
	return cmd
}

func newJobsRetryCmd(g *globals) *cobra.Command {
	var ff filterFlags
	var priority, limit int
	var yes bool
	cmd := &cobra.Command{
		Use:   "retry JOB_ID | retry FILTER_FLAGS [--yes]",
		Short: "Run a finished job's prompt again as a new job that supersedes it, or every one matching filter flags",
		Long: `Run the prompt of a succeeded, failed or cancelled job again as a new job,
with a fresh attempt budget; the old job becomes superseded and stays in the
prompt's history. --priority changes the new job's priority.

With filter flags instead of a JOB_ID (the flags of jobs list, at least
one), it counts the failed and cancelled jobs they match that were not
retried yet and says so; with --yes it retries them at their priority,
each in its own transaction with events naming you (cli:USER) and the bulk
action's ID, and prints how many it retried and how many changed meanwhile.
Succeeded jobs are retried only with --state succeeded.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if cmd.Flags().Changed("priority") {
					return usageError{errors.New("--priority applies to one job; a bulk retry keeps each job's priority")}
				}
				return runBulk(cmd, g, &ff, bulkAction{verb: "retry", past: "retried",
					count: jobs.CountRetryable, run: jobs.RetryMatching, states: jobs.RetryableStates}, yes, limit)
			}
			if ff.set(cmd) || cmd.Flags().Changed("limit") {
				return usageError{errors.New("give a JOB_ID or filter flags, not both")}
			}
			p := jobs.RetryParams{JobID: args[0], By: cliActor()}
			if cmd.Flags().Changed("priority") {
				if priority < jobs.MinPriority || priority > jobs.MaxPriority {
					return usageError{fmt.Errorf("--priority %d: want %d–%d", priority, jobs.MinPriority, jobs.MaxPriority)}
				}
				p.Priority = &priority
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				j, err := st.Retry(ctx, p)
				if err != nil {
					return operationError(ctx, st, "retry", args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (supersedes %s)\n", j.ID, j.State, j.Supersedes)
				return nil
			})
		},
	}
	ff.register(cmd)
	bulkFlags(cmd, "retry", &yes, &limit)
	cmd.Flags().IntVar(&priority, "priority", 0, "the new job's priority, 0–100 (default: the old job's)")
	return cmd
}

// operationError says why cancel or retry could not act on a job, in the
// user's terms: "job J is superseded: a retry replaced it with job K".
func operationError(ctx context.Context, st jobs.Store, op, id string, err error) error {
	var te *jobs.TransitionError
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return fmt.Errorf("no job %s", id)
	case !errors.As(err, &te):
		return err
	}
	msg := fmt.Sprintf("job %s is %s", id, te.From)
	switch {
	case te.From == jobs.Superseded:
		msg += ": a retry replaced it"
		if j, err := st.GetJob(ctx, "", id); err == nil {
			if js, err := st.PromptJobs(ctx, "", j.PromptID); err == nil && len(js) > 0 {
				msg += " with job " + js[len(js)-1].ID + "; " + op + " that one"
			}
		}
	case op == "cancel":
		msg += ": only queued or running jobs can be cancelled"
	default:
		msg += ": only succeeded, failed or cancelled jobs can be retried (cancel it first)"
	}
	return errors.New(msg)
}

// fmtCost prints a cost: "$0.001234", or "unknown (at least $0.001234)"
// when some call's cost is unknown.
func fmtCost(c pktype.Cost) string {
	if c.Known {
		return fmt.Sprintf("$%.6f", c.USD)
	}
	if c.USD > 0 {
		return fmt.Sprintf("unknown (at least $%.6f)", c.USD)
	}
	return "unknown"
}

// spend reads the usage ledger since t grouped by g (with org, only that
// org's); nil when group is "".
func spend(ctx context.Context, st jobs.Store, org string, since time.Time, g jobs.UsageGroup) ([]jobs.UsageBucket, error) {
	if g == "" {
		return nil, nil
	}
	return st.Usage(ctx, jobs.UsageParams{OrgID: org, From: since, GroupBy: []jobs.UsageGroup{g}})
}

// printSpend prints usage buckets as a table whose first column, named
// key, is what they are grouped by.
func printSpend(w io.Writer, key string, bs []jobs.UsageBucket, name func(jobs.UsageBucket) string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\n%s\tCALLS\tINPUT TOKENS\tOUTPUT TOKENS\tCACHED\tREASONING\tUNKNOWN USAGE\tCOST USD\tUNKNOWN COST\n", key)
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.6f\t%d\n", orDash(name(b)), b.Requests, b.InputTokens, b.OutputTokens,
			b.CachedInputTokens, b.ReasoningTokens, b.UnknownUsage, b.CostUSD, b.UnknownCost)
	}
	return tw.Flush()
}

// printOrgCounts prints each org's jobs by state, one column per state,
// and its jobs failed in the window.
func printOrgCounts(w io.Writer, counts []jobs.OrgCounts) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "\nORG")
	for _, st := range jobs.States() {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(st)))
	}
	fmt.Fprintln(tw, "\tFAILED IN WINDOW")
	for _, o := range counts {
		fmt.Fprint(tw, orDash(o.OrgID))
		for _, st := range jobs.States() {
			fmt.Fprintf(tw, "\t%d", o.Counts[st])
		}
		fmt.Fprintf(tw, "\t%d\n", o.FailedInWindow)
	}
	return tw.Flush()
}

func newJobsMetricsCmd(g *globals) *cobra.Command {
	var since, org string
	var asJSON, byOrg, byToken bool
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Count jobs by state; latency, error rate and spend of recent jobs (per org with --by-org, counts too; per token with --by-token); the shared pacing",
		Long: `Count jobs by state, and the latency and error rate of the jobs finished
in the --since window (per org with --by-org).

With --by-org, also each org's jobs by state, and how many of them failed
in the window; and the provider calls of the window from the usage
ledger, per org: their count, the known token counts, the known cost in
USD by the prices of promptkit.yaml, and how many calls have unknown usage
or cost (no price for the model, usage the provider did not report, a
call lost with a worker). --by-token gives the same per API token.

Then, per backend, the pacing the serve and worker processes on this
database share: the provider-wide rate learned from 429s (RATE, the same
in every process; each dispatches its part of it, in proportion to its
callers waiting for the backend), when the last 429 cut it, until when
a provider's Retry-After pauses every process, and how many processes
have callers on the backend. Each process's own view is on its /metrics
(promptkit_backend_learned_rate, promptkit_backend_pacing_share).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := parseTime("since", since)
			if err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				m, err := st.Metrics(ctx, jobs.MetricsParams{OrgID: org, Since: t, ByOrg: byOrg})
				if err != nil {
					return err
				}
				pacing, err := sharedPacing(ctx, st, time.Now())
				if err != nil {
					return err
				}
				var orgSpend, tokenSpend []jobs.UsageBucket
				if byOrg {
					if orgSpend, err = spend(ctx, st, org, t, jobs.UsageByOrg); err != nil {
						return err
					}
				}
				if byToken {
					if tokenSpend, err = spend(ctx, st, org, t, jobs.UsageByToken); err != nil {
						return err
					}
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), struct {
						jobs.Metrics
						Pacing     []backendPacing    `json:"pacing"`
						OrgSpend   []jobs.UsageBucket `json:"org_spend,omitempty"`
						TokenSpend []jobs.UsageBucket `json:"token_spend,omitempty"`
					}{m, pacing, orgSpend, tokenSpend})
				}
				w := cmd.OutOrStdout()
				for _, s := range jobs.States() {
					fmt.Fprintf(w, "%-11s %d\n", s, m.Counts[s])
				}
				fmt.Fprintf(w, "\nfinished %d; latency p50 %v, p95 %v, p99 %v\n", m.Finished,
					m.LatencyP50.Round(time.Millisecond), m.LatencyP95.Round(time.Millisecond), m.LatencyP99.Round(time.Millisecond))
				for _, k := range jobs.ErrorKinds() {
					if r, ok := m.ErrorRate[k]; ok && r > 0 {
						fmt.Fprintf(w, "error rate %-17s %.1f%%\n", k, 100*r)
					}
				}
				if byOrg {
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "\nORG\tFINISHED\tLATENCY AVG\tLATENCY P95")
					for _, o := range m.Orgs {
						fmt.Fprintf(tw, "%s\t%d\t%v\t%v\n", orDash(o.OrgID), o.Finished,
							o.LatencyAverage.Round(time.Millisecond), o.LatencyP95.Round(time.Millisecond))
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					if err := printOrgCounts(w, m.OrgCounts); err != nil {
						return err
					}
					if err := printSpend(w, "ORG", orgSpend, func(b jobs.UsageBucket) string { return b.OrgID }); err != nil {
						return err
					}
				}
				if byToken {
					if err := printSpend(w, "TOKEN", tokenSpend, func(b jobs.UsageBucket) string { return b.TokenID }); err != nil {
						return err
					}
				}
				return printPacing(w, pacing)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&since, "since", "24h", "window for latency and error rate")
	f.StringVar(&org, "org", "", "only this org")
	f.BoolVar(&byOrg, "by-org", false, "also jobs by state, average and p95 latency, and spend, per org")
	f.BoolVar(&byToken, "by-token", false, "also spend per API token (- for jobs submitted without one)")
	f.BoolVar(&asJSON, "json", false, "print JSON; counts keyed by state")
	return cmd
}

func newJobsArchiveCmd(g *globals) *cobra.Command {
	var before string
	var yes bool
	cmd := &cobra.Command{
		Use:   "archive --before DATE [--yes]",
		Short: "Delete finished jobs finished before DATE, with their events and responses",
		Long: `Delete every succeeded, failed, cancelled or superseded job that finished
before DATE, with its events and its answer, and prompts left without jobs.
It asks first on a terminal; elsewhere (cron, scripts) pass --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before == "" {
				return usageError{errors.New("--before is required")}
			}
			t, err := parseTime("before", before)
			if err != nil {
				return err
			}
			if !yes {
				if !isTerminal(cmd.InOrStdin()) {
					return usageError{fmt.Errorf("this deletes every job that finished before %s; pass --yes to confirm (no terminal to ask on)", fmtTime(t))}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Delete every job that finished before %s, with its events and answer? [y/N] ", fmtTime(t))
				answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					fmt.Fprintln(cmd.ErrOrStderr(), "promptkit: nothing deleted")
					return nil
				}
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				n, err := st.Archive(ctx, t)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "archived %d jobs\n", n)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "cut-off (RFC 3339, date, or a duration such as 720h)")
	cmd.Flags().BoolVar(&yes, "yes", false, "delete without asking")
	return cmd
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

func newJobsReclaimCmd(g *globals) *cobra.Command {
	var reclaimAfter, stuckAfter time.Duration
	cmd := &cobra.Command{
		Use:   "reclaim",
		Short: "Requeue or fail running jobs whose heartbeat stopped (for cron)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				r, err := st.Reclaim(ctx, jobs.ReclaimParams{ReclaimAfter: reclaimAfter, StuckAfter: stuckAfter})
				if errors.Is(err, jobs.ErrInvalid) {
					return usageError{err}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "requeued %d, failed as stuck %d\n", len(r.Requeued), len(r.Failed))
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&reclaimAfter, "reclaim-after", jobs.DefaultReclaimAfter, "heartbeat age that counts as a dead worker")
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", jobs.DefaultStuckAfter, "run time after which a dead worker's job fails as stuck")
	return cmd
}
