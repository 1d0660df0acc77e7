package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/jobs"
)

// Queue control (docs/service.md): hold and release a backend, pause and
// resume an org's queue, list and drain workers. Each acts on the job
// database, which every serve and worker process on it reads: holds
// through their shared pacing, pauses at every claim, drains on each
// worker's heartbeat.

func newBackendsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "List the backends' shared pacing, and hold or release a backend",
		Long: `A held backend gets no new provider call from any serve or worker process
on the database: a model group sends its calls to its other backends, and
the jobs of a profile whose every backend is held stay queued; calls in
flight finish. Release undoes it. Unlike a provider's pause (Retry-After),
a hold has no end of its own. See docs/service.md and docs/routing.md.`,
	}
	cmd.AddCommand(newBackendsListCmd(g), newBackendsHoldCmd(g, true), newBackendsHoldCmd(g, false))
	return cmd
}

// backendRow is one backend of backends ls --json.
type backendRow struct {
	Backend           string    `json:"backend"`
	Held              bool      `json:"held"`
	PausedUntil       time.Time `json:"paused_until,omitzero"`
	CooldownUntil     time.Time `json:"cooldown_until,omitzero"`
	RequestsPerSecond float64   `json:"learned_requests_per_second,omitempty"`
	Processes         int       `json:"processes"`
}

func newBackendsListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the backends known to the database: held, paused, cooling down, learned rate",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				bs, err := st.SyncPacing(ctx, jobs.PacingSyncParams{})
				if err != nil {
					return err
				}
				now := time.Now()
				rows := make([]backendRow, 0, len(bs))
				for _, b := range bs {
					r := backendRow{Backend: b.Backend, Held: b.Held, Processes: len(b.Peers),
						RequestsPerSecond: b.RequestsPerSecond(now)}
					if b.PauseUntil.After(now) {
						r.PausedUntil = b.PauseUntil
					}
					if b.CooldownUntil.After(now) {
						r.CooldownUntil = b.CooldownUntil
					}
					rows = append(rows, r)
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), rows)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "BACKEND\tHELD\tPAUSED UNTIL\tCOOLDOWN UNTIL\tLEARNED RATE\tPROCESSES")
				for _, r := range rows {
					rate := "-"
					if r.RequestsPerSecond > 0 {
						rate = strconv.FormatFloat(r.RequestsPerSecond, 'f', 2, 64) + "/s"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.Backend, yesNo(r.Held), fmtTime(r.PausedUntil),
						fmtTime(r.CooldownUntil), rate, r.Processes)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newBackendsHoldCmd(g *globals, held bool) *cobra.Command {
	use, short, done := "hold BACKEND", "Hold a backend: no new provider call goes to it until released", "held"
	if !held {
		use, short, done = "release BACKEND", "Release a held backend", "released"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := jobs.NormalizeBackend(args[0]); err != nil {
				return usageError{err}
			}
			return withNewStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				if err := st.HoldBackend(ctx, args[0], held); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "backend %s %s\n", args[0], done)
				return nil
			})
		},
	}
}

func newOrgsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orgs",
		Short: "Pause or resume an org's queue",
		Long: `A paused org's queued jobs stay queued: no worker claims them, as if its
max_running were reached, while its running jobs finish and the other
orgs' jobs are claimed as usual. The pause is part of the org's limit
(promptkit limits ls shows it; limits set keeps it; limits rm removes the
limit and its pause). See docs/service.md.`,
	}
	cmd.AddCommand(newOrgsPauseCmd(g, true), newOrgsPauseCmd(g, false))
	return cmd
}

func newOrgsPauseCmd(g *globals, paused bool) *cobra.Command {
	use, short, done := "pause ORG", "Pause an org's queue: its queued jobs stay queued", "paused"
	if !paused {
		use, short, done = "resume ORG", "Resume an org's paused queue", "resumed"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := jobs.NormalizeOrg(args[0]); err != nil {
				return usageError{err}
			}
			return withNewStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				if _, err := st.PauseOrg(ctx, args[0], paused); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "queue of org %s %s\n", args[0], done)
				return nil
			})
		},
	}
}

func newWorkersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the worker processes, and drain one",
		Long: `Every worker (promptkit worker, and the pool of promptkit serve) reports
itself on each heartbeat. A drained worker claims no more jobs and lets its
running jobs finish: promptkit worker then exits (status 0); serve keeps
serving its API, and its pool claims again once the drain is undone. A
worker learns of a drain, and of its undoing, at its next heartbeat
(heartbeat_interval). See docs/service.md.`,
	}
	cmd.AddCommand(newWorkersListCmd(g), newWorkersDrainCmd(g, true), newWorkersDrainCmd(g, false))
	return cmd
}

func newWorkersListCmd(g *globals) *cobra.Command {
	var asJSON bool
	var since time.Duration
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the workers seen lately, by name",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since <= 0 {
				return usageError{errors.New("--since must be above zero")}
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				ws, err := st.Workers(ctx, time.Now().Add(-since))
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(ws))
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "WORKER\tHOST\tPID\tRUNNING\tDRAINING\tSTARTED\tSEEN")
				for _, w := range ws {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", w.Worker, w.Host, w.PID, w.Running, yesNo(w.Draining),
						fmtTime(w.StartedAt), fmtTime(w.SeenAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&since, "since", 24*time.Hour, "list the workers seen within this long")
	return cmd
}

func newWorkersDrainCmd(g *globals, drain bool) *cobra.Command {
	use, short, done := "drain WORKER", "Drain a worker: it claims no more jobs; promptkit worker exits once idle", "draining"
	if !drain {
		use, short, done = "undrain WORKER", "Undo a worker's drain: it claims jobs again", "no longer draining"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				_, err := st.DrainWorker(ctx, args[0], drain)
				if errors.Is(err, jobs.ErrNotFound) {
					return usageError{fmt.Errorf("no worker %s has reported (promptkit workers ls)", args[0])}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "worker %s %s\n", args[0], done)
				return nil
			})
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}
