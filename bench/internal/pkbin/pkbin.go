// Package pkbin builds the promptkit binary for the comparison programs
// and tests that run it as a child process (the command's own package,
// cmd/promptkit/internal/cli, is internal to it), runs `promptkit serve`
// (Serve) and one-shot commands (Run).
package pkbin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds cmd/promptkit of the promptkit tree the bench module
// replaces, into a temporary directory; cleanup removes it.
func Build() (bin string, cleanup func(), err error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/promptkit/promptkit").Output()
	if err != nil {
		return "", nil, fmt.Errorf("locating the promptkit tree: %w", err)
	}
	root := strings.TrimSpace(string(out))
	dir, err := os.MkdirTemp("", "promptkit-bench-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "promptkit")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/promptkit")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build ./cmd/promptkit: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Run runs `bin args…` to its end and returns what it wrote to stdout.
// A non-zero exit is an error that carries its stderr.
func Run(ctx context.Context, bin string, args ...string) (stdout string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("promptkit %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}
