package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/jobs"
)

func newTokensCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke API tokens",
		Long: `API tokens authenticate requests to serve's /v1 API. Once any token exists,
every request needs one; with none, serve on a loopback address accepts
requests as org "default", user "local". Only a token's hash is stored.`,
	}
	cmd.AddCommand(newTokensCreateCmd(g), newTokensListCmd(g), newTokensRevokeCmd(g))
	return cmd
}

func newTokensCreateCmd(g *globals) *cobra.Command {
	var org, user, role string
	cmd := &cobra.Command{
		Use:   "create --org ORG --user USER [--role member|admin|operator]",
		Short: "Create a token and print it once, alone on the last line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret, hash := jobs.NewTokenSecret()
			p, err := jobs.CreateTokenParams{OrgID: org, UserID: user, Role: jobs.Role(role), Hash: hash}.Normalize()
			if err != nil {
				return usageError{err}
			}
			return withNewStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				t, err := st.CreateToken(ctx, p)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "token %s for org %s, user %s, role %s; it is shown only now:\n", t.ID, t.OrgID, t.UserID, t.Role)
				fmt.Fprintln(out, secret)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "the token's org (required)")
	f.StringVar(&user, "user", "", "the token's user (required)")
	f.StringVar(&role, "role", string(jobs.RoleMember), "member (its own prompts), admin (its org's) or operator (every org's, and the dashboard's backends and workers)")
	return cmd
}

func newTokensListCmd(g *globals) *cobra.Command {
	var org string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets), revoked ones included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				ts, err := st.ListTokens(ctx, org)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(ts))
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tORG\tUSER\tROLE\tCREATED\tREVOKED")
				for _, t := range ts {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.OrgID, t.UserID, t.Role, fmtTime(t.CreatedAt), fmtTime(t.RevokedAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "only this org's tokens")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTokensRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token; requests with it are refused from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				t, err := st.RevokeToken(ctx, args[0])
				if errors.Is(err, jobs.ErrNotFound) {
					return usageError{fmt.Errorf("no token %s", args[0])}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", t.ID)
				return nil
			})
		},
	}
}
