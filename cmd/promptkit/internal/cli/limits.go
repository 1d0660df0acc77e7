package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
)

func newLimitsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Set, list and remove the limits of orgs and tokens",
		Long: `A limit holds an org's or a token's quotas (requests and model tokens per
minute), budgets (USD per day and per month), an org's concurrency (jobs
running at once) and its share in fair sharing (its weight: among jobs of
equal priority, claims serve the orgs in turn, an org of weight 2 twice as
often as one of weight 1). A zero field is no limit. See docs/budgets.md.`,
	}
	cmd.AddCommand(newLimitsSetCmd(g), newLimitsListCmd(g), newLimitsRemoveCmd(g))
	return cmd
}

// limitSubject reads --org or --token: exactly one of them.
func limitSubject(org, token string) (jobs.LimitScope, string, error) {
	switch {
	case org != "" && token != "":
		return "", "", usageError{errors.New("give --org or --token, not both")}
	case org != "":
		return jobs.LimitOrg, org, nil
	case token != "":
		return jobs.LimitToken, token, nil
	}
	return "", "", usageError{errors.New("give --org ID or --token ID")}
}

func newLimitsSetCmd(g *globals) *cobra.Command {
	var org, token string
	var l jobs.Limit
	cmd := &cobra.Command{
		Use:   "set (--org ID | --token ID) [--rpm N] [--tpm N] [--max-running N] [--daily-usd X] [--monthly-usd X] [--weight N]",
		Short: "Set the limit of an org or a token, replacing the one it had",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if l.Scope, l.Subject, err = limitSubject(org, token); err != nil {
				return err
			}
			if l, err = l.Normalize(); err != nil {
				return usageError{err}
			}
			return withNewStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				out, err := st.SetLimit(ctx, l)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "limit of %s %s set\n", out.Scope, out.Subject)
				if note := budgetNote(g, out); note != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), note)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "the org the limit applies to")
	f.StringVar(&token, "token", "", "the token (its ID) the limit applies to")
	f.IntVar(&l.RequestsPerMinute, "rpm", 0, "requests per minute (0: no limit)")
	f.IntVar(&l.TokensPerMinute, "tpm", 0, "model tokens per minute (0: no limit)")
	f.IntVar(&l.MaxRunning, "max-running", 0, "an org's jobs running at once (0: no limit)")
	f.Float64Var(&l.DailyUSD, "daily-usd", 0, "spend per day in USD (0: no limit)")
	f.Float64Var(&l.MonthlyUSD, "monthly-usd", 0, "spend per month in USD (0: no limit)")
	f.IntVar(&l.Weight, "weight", 0, "an org's share in fair sharing (0: 1)")
	return cmd
}

// budgetNote says when a budget of l is smaller than what one request can
// cost: a request body as large as the server takes, read as input tokens
// (a quarter of its bytes) at the dearest input price of the config. The
// spend may pass such a budget by one request's cost (docs/budgets.md,
// The bound). "" when it is not, or when the config cannot be read.
func budgetNote(g *globals, l jobs.Limit) string {
	budget := l.DailyUSD
	if l.MonthlyUSD > 0 && (budget == 0 || l.MonthlyUSD < budget) {
		budget = l.MonthlyUSD
	}
	if budget == 0 {
		return ""
	}
	sc, err := g.service()
	if err != nil {
		return ""
	}
	cfg, _, err := loadConfig(g.config, "")
	if err != nil {
		return ""
	}
	var dearest promptkit.Price
	for _, p := range cfg.Prices {
		if p.Input > dearest.Input {
			dearest = p
		}
	}
	worst := float64(sc.MaxBodyBytes) / 4 * dearest.Input / 1e6
	if worst <= budget {
		return ""
	}
	return fmt.Sprintf("note: one request of up to %d bytes (max_body_bytes) can cost $%.2f in input tokens alone at %s's price, "+
		"more than this budget of $%.2f: the spend can pass it by one request's cost", sc.MaxBodyBytes, worst, dearest.Model, budget)
}

func newLimitsListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the limits, by scope and subject",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				ls, err := st.Limits(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(ls))
				}
				num := func(n int) string {
					if n == 0 {
						return "-"
					}
					return strconv.Itoa(n)
				}
				usd := func(x float64) string {
					if x == 0 {
						return "-"
					}
					return strconv.FormatFloat(x, 'f', -1, 64)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SCOPE\tSUBJECT\tRPM\tTPM\tMAX RUNNING\tDAILY USD\tMONTHLY USD\tWEIGHT\tPAUSED\tUPDATED")
				for _, l := range ls {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Scope, l.Subject, num(l.RequestsPerMinute),
						num(l.TokensPerMinute), num(l.MaxRunning), usd(l.DailyUSD), usd(l.MonthlyUSD), num(l.Weight),
						yesNo(l.Paused), fmtTime(l.UpdatedAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newLimitsRemoveCmd(g *globals) *cobra.Command {
	var org, token string
	cmd := &cobra.Command{
		Use:   "rm (--org ID | --token ID)",
		Short: "Remove the limit of an org or a token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, subject, err := limitSubject(org, token)
			if err != nil {
				return err
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				err := st.DeleteLimit(ctx, scope, subject)
				if errors.Is(err, jobs.ErrNotFound) {
					return usageError{fmt.Errorf("no limit for %s %s", scope, subject)}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "limit of %s %s removed\n", scope, subject)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "the org whose limit to remove")
	cmd.Flags().StringVar(&token, "token", "", "the token whose limit to remove")
	return cmd
}
