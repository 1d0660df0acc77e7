package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/promptkit/promptkit"

// TestNoProductionImports: no non-test package of the module depends on
// test support — internal/testkit and its subpackages, the conformance
// suite jobs/jobstest and the stores' shared scenarios
// jobs/internal/storetest — directly or through another package, except
// test support itself.
func TestNoProductionImports(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: skipping the import check")
	}
	// Deps lists a package's non-test dependencies, transitively.
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	kit := module + "/internal/testkit"
	isKit := func(p string) bool {
		return p == kit || strings.HasPrefix(p, kit+"/") || p == module+"/jobs/jobstest" || p == module+"/jobs/internal/storetest"
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || isKit(fields[0]) {
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			if isKit(dep) {
				t.Errorf("%s depends on %s: production code must not use test support", fields[0], dep)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("go list named %d packages besides the kit; want the whole module:\n%s", checked, out)
	}
}
