// Package cli implements the promptkit command. cmd/promptkit only calls
// Main; tests call Run with their own arguments and streams.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command line and exits.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run executes args and returns the exit code. Errors are printed to
// stderr as one line.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "promptkit: %s\n", oneLine(err))
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks bad flags or arguments (exit code 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// globals are the persistent flags every command accepts.
type globals struct {
	config   string
	database string
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "promptkit",
		Short:         "Reliable, durable execution of LLM prompts",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&g.config, "config", "", `config file (default "promptkit.yaml" when it exists)`)
	root.PersistentFlags().StringVar(&g.database, "database", "", `job database: a SQLite file, sqlite://PATH or postgres://URL (default "promptkit.db")`)
	root.AddCommand(newRunCmd(g), newFakeProviderCmd(), newMigrateCmd(g), newJobsCmd(g),
		newServeCmd(g), newWorkerCmd(g), newSubmitCmd(g), newTokensCmd(g))
	return root
}

// oneLine is the error's first line, without the "promptkit: " that
// library errors start with (Run prints its own).
func oneLine(err error) string {
	s := strings.TrimPrefix(err.Error(), "promptkit: ")
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return s[:i]
		}
	}
	return s
}
