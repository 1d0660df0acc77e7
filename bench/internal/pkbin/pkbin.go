// Package pkbin builds the promptkit binary for the comparison programs
// that run it as a child process, and runs `promptkit serve` (Serve).
package pkbin

import (
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
