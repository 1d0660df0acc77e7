// Package cli implements the promptkit command: every subcommand (serve,
// worker, jobs, tokens, migrate, …), and the only package that wires the
// stores, the engine, the workers and the server together. It sits with
// the command it implements, under cmd/promptkit/internal: cmd/promptkit
// only calls Main; this package's tests and the command's fault tests
// (cmd/promptkit/internal/faults) call Run with their own arguments and
// streams. Code outside cmd/promptkit (the bench module's programs and
// tests) runs the built binary instead.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command line and exits.
func Main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	// After the second signal the process has nothing gentler left to
	// offer, so a third gets Go's default action and ends it, even if the
	// hand-back hangs on an unreachable database.
	ctx, stop := onSignals(context.Background(), sigs, func() { signal.Stop(sigs) })
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	signal.Stop(sigs)
	os.Exit(code)
}

// hurryKey is the context key of the context onSignals ends on the
// second signal.
type hurryKey struct{}

// onSignals returns a context that ends on the first signal from sigs:
// long-running commands then stop gracefully. The second signal ends the
// context stopContext derives from it, cutting the graceful stop short
// (a worker hands its running jobs back at once), and calls release.
// stop ends both contexts and the goroutine watching sigs.
func onSignals(parent context.Context, sigs <-chan os.Signal, release func()) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	// The second signal must end the stop's context after ctx ended, so
	// hurry does not end with parent's cancellation, only with stop.
	hurry, hurryNow := context.WithCancel(context.WithoutCancel(parent))
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			hurryNow()
			release()
		case <-done:
		}
	}()
	var once sync.Once
	return context.WithValue(ctx, hurryKey{}, hurry), func() {
		once.Do(func() { close(done) })
		cancel()
		hurryNow()
	}
}

// stopContext is the context of the graceful stop that follows ctx's
// end: it does not end with ctx, but with the second signal when ctx
// comes from onSignals. canHurry says whether a second signal can end it;
// release frees it.
func stopContext(ctx context.Context) (stop context.Context, canHurry bool, release context.CancelFunc) {
	stop, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hurry, ok := ctx.Value(hurryKey{}).(context.Context)
	if !ok {
		return stop, false, cancel
	}
	unregister := context.AfterFunc(hurry, cancel)
	return stop, true, func() {
		unregister()
		cancel()
	}
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
		// A command's own exit code (run: 3 for an output that fails
		// the prompt's output schema).
		var ce interface{ ExitCode() int }
		if errors.As(err, &ce) {
			return ce.ExitCode()
		}
		return 1
	}
	return 0
}

// usageArgs makes every command's argument check a usage error (exit 2),
// like an unknown flag's: a missing argument is the same kind of mistake.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
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
	root.Version = version()
	run := newRunCmd(g)
	run.Flags().StringVar(&g.config, "config", "", configUsage)
	// --config and --database only where they mean something: not on
	// run's --database, nor on fake-provider at all.
	dbCmds := []*cobra.Command{newMigrateCmd(g), newJobsCmd(g), newBatchesCmd(g), newServeCmd(g), newWorkerCmd(g), newSubmitCmd(g), newTokensCmd(g), newLimitsCmd(g),
		newBackendsCmd(g), newOrgsCmd(g), newWorkersCmd(g)}
	for _, c := range dbCmds {
		c.PersistentFlags().StringVar(&g.config, "config", "", configUsage)
		c.PersistentFlags().StringVar(&g.database, "database", "", `job database: a SQLite file, sqlite://PATH or postgres://URL (default: service.database in the config, else "promptkit.db")`)
	}
	root.AddCommand(append(dbCmds, run, newFakeProviderCmd())...)
	usageArgs(root)
	return root
}

const configUsage = `config file (default "promptkit.yaml" when it exists)`

// version is the module version and VCS revision the binary was built
// from, as Go records them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		return bi.Main.Version
	}
	return fmt.Sprintf("%s (commit %s%s)", bi.Main.Version, rev, modified)
}

// oneLine renders an error as one line that ends in its cause: the lines
// of a multi-line error (YAML's list of bad keys, pgx's connection
// attempts) are joined with "; ", and the "promptkit: " that library
// errors carry, at the start and in the middle of wrapped ones, is
// dropped (Run prints its own once).
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s := strings.Join(parts, "; ")
	s = strings.ReplaceAll(s, ":; ", ": ")
	return strings.ReplaceAll(s, "promptkit: ", "")
}
