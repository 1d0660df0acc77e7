package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/promptkit/promptkit/jobs"
)

func newBatchesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "batches",
		Short: "Inspect and cancel the batches of the OpenAI-compatible Batch API, across orgs",
		Long: `Inspect and cancel the batches clients created with POST /v1/batches, of
every org. serve's batch processor validates a batch's input file, runs each
line as a job at service.batch_priority, and writes the output and error
files when the batch completes, expires or is cancelled.`,
	}
	cmd.AddCommand(newBatchesListCmd(g), newBatchesShowCmd(g), newBatchesCancelCmd(g))
	return cmd
}

func newBatchesListCmd(g *globals) *cobra.Command {
	var org, after string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List batches, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageError{fmt.Errorf("--limit %d is negative", limit)}
			}
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				bs, more, err := st.ListBatches(ctx, jobs.BatchListParams{OrgID: org, After: after, Limit: limit})
				if errors.Is(err, jobs.ErrInvalid) {
					return usageError{err}
				}
				if err != nil {
					return err
				}
				if more && len(bs) > 0 {
					defer fmt.Fprintf(cmd.ErrOrStderr(), "promptkit: more batches: add --after %s\n", bs[len(bs)-1].ID)
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNil(bs))
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tORG\tSTATUS\tTOTAL\tCOMPLETED\tFAILED\tCREATED\tEXPIRES")
				for _, b := range bs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", b.ID, orDash(b.OrgID), b.Status,
						b.Counts.Total, b.Counts.Completed, b.Counts.Failed, fmtTime(b.CreatedAt), fmtTime(b.ExpiresAt))
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "only batches of this org")
	f.IntVar(&limit, "limit", 50, "at most this many batches")
	f.StringVar(&after, "after", "", "continue a listing: the ID the previous page printed")
	f.BoolVar(&asJSON, "json", false, "print the batches as JSON")
	return cmd
}

func newBatchesShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show BATCH_ID",
		Short: "Show a batch: status, request counts, times, files and validation errors",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				b, err := st.GetBatch(ctx, "", args[0])
				if errors.Is(err, jobs.ErrNotFound) {
					return fmt.Errorf("no batch %s", args[0])
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), b)
				}
				printBatch(cmd.OutOrStdout(), b)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the batch as JSON")
	return cmd
}

func printBatch(w io.Writer, b jobs.Batch) {
	fmt.Fprintf(w, "batch %s  %s  priority %d\n", b.ID, b.Status, b.Priority)
	fmt.Fprintf(w, "org %s  user %s  endpoint %s  window %s\n", orDash(b.OrgID), orDash(b.CreatedBy), b.Endpoint, b.CompletionWindow)
	c := b.Counts
	fmt.Fprintf(w, "requests: %d total, %d completed, %d failed\n", c.Total, c.Completed, c.Failed)
	fmt.Fprintf(w, "input file %s  output file %s  error file %s\n", b.InputFileID, orDash(b.OutputFileID), orDash(b.ErrorFileID))
	fmt.Fprintln(w, "\ntimes:")
	for _, t := range []struct {
		name string
		at   time.Time
	}{
		{"created", b.CreatedAt}, {"in_progress", b.InProgressAt}, {"finalizing", b.FinalizingAt},
		{"completed", b.CompletedAt}, {"failed", b.FailedAt}, {"cancelling", b.CancellingAt},
		{"cancelled", b.CancelledAt}, {"expired", b.ExpiredAt}, {"expires", b.ExpiresAt},
	} {
		if !t.at.IsZero() {
			fmt.Fprintf(w, "  %-12s %s\n", t.name, fmtTime(t.at))
		}
	}
	if len(b.Errors) > 0 {
		fmt.Fprintln(w, "\nvalidation errors:")
		for _, e := range b.Errors {
			where := "file"
			if e.Line > 0 {
				where = fmt.Sprintf("line %d", e.Line)
			}
			param := ""
			if e.Param != "" {
				param = " (" + e.Param + ")"
			}
			fmt.Fprintf(w, "  %s: %s%s: %s\n", where, e.Code, param, e.Message)
		}
	}
}

func newBatchesCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel BATCH_ID",
		Short: "Cancel a validating or in_progress batch",
		Long: `Cancel a validating or in_progress batch: it becomes cancelling, and serve's
batch processor cancels its unfinished jobs and ends it as cancelled, with the
answers it already has in its output file and the other requests in its
error file. A batch already cancelled or cancelling is left as it is; a
finished one cannot be cancelled.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, g, func(ctx context.Context, st jobs.Store) error {
				b, err := st.CancelBatch(ctx, "", args[0])
				switch {
				case errors.Is(err, jobs.ErrNotFound):
					return fmt.Errorf("no batch %s", args[0])
				case errors.Is(err, jobs.ErrBatchChanged):
					if cur, gerr := st.GetBatch(ctx, "", args[0]); gerr == nil {
						return fmt.Errorf("batch %s is %s: only a validating or in_progress batch can be cancelled", args[0], cur.Status)
					}
					return fmt.Errorf("batch %s can no longer be cancelled: it is finished or finishing", args[0])
				case err != nil:
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", b.ID, b.Status)
				return nil
			})
		},
	}
}
