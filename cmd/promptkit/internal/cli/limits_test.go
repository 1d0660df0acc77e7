package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// limits set stores an org's or a token's limit, replacing the one it had;
// ls lists them; rm removes one. A bad flag is a usage error (exit 2).
func TestLimitsCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "jobs.db")
	if code, _, errOut := run(t, "limits", "set", "--database", db, "--org", "acme", "--max-running", "4", "--weight", "2",
		"--daily-usd", "12.5"); code != 0 {
		t.Fatalf("limits set: %s", errOut)
	}
	if code, _, errOut := run(t, "limits", "set", "--database", db, "--token", "tok-1", "--rpm", "60"); code != 0 {
		t.Fatalf("limits set --token: %s", errOut)
	}
	code, out, _ := run(t, "limits", "ls", "--database", db, "--json")
	var ls []struct {
		Scope, Subject string
		MaxRunning     int     `json:"max_running"`
		Weight         int     `json:"weight"`
		DailyUSD       float64 `json:"daily_usd"`
		RPM            int     `json:"requests_per_minute"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil || len(ls) != 2 ||
		ls[0].Subject != "acme" || ls[0].MaxRunning != 4 || ls[0].Weight != 2 || ls[0].DailyUSD != 12.5 ||
		ls[1].Scope != "token" || ls[1].RPM != 60 {
		t.Fatalf("limits ls --json: %d %s", code, out)
	}
	if code, out, _ := run(t, "limits", "ls", "--database", db); code != 0 || !strings.Contains(out, "acme") ||
		!strings.Contains(out, "MAX RUNNING") {
		t.Fatalf("limits ls: %d %s", code, out)
	}
	if code, _, errOut := run(t, "limits", "rm", "--database", db, "--org", "acme"); code != 0 {
		t.Fatalf("limits rm: %s", errOut)
	}
	if code, _, _ := run(t, "limits", "rm", "--database", db, "--org", "acme"); code != 2 {
		t.Errorf("limits rm of a missing limit: exit %d, want 2", code)
	}
	for _, args := range [][]string{
		{"limits", "set", "--database", db},
		{"limits", "set", "--database", db, "--org", "a", "--token", "t"},
		{"limits", "set", "--database", db, "--token", "t", "--weight", "2"},
		{"limits", "set", "--database", db, "--org", "a", "--max-running", "-1"},
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// limits set says when a budget is smaller than one request at the
// largest body the server takes can cost, at the dearest input price; a
// budget above it, or a config without prices, gets no note.
func TestLimitsSetSmallBudgetNote(t *testing.T) {
	_, cfg := inDir(t, "service:\n  max_body_bytes: 4000000\nprices:\n  - model: cheap\n    input_per_million: 0.1\n"+
		"  - model: dear\n    input_per_million: 2.5\n    output_per_million: 10\n")
	db := filepath.Join(t.TempDir(), "jobs.db")
	// 4,000,000 bytes: a million tokens at $2.50 a million.
	code, _, errOut := run(t, "limits", "set", "--config", cfg, "--database", db, "--org", "acme", "--daily-usd", "0.20")
	if code != 0 || !strings.Contains(errOut, "can cost $2.50") || !strings.Contains(errOut, "dear's price") ||
		!strings.Contains(errOut, "budget of $0.20") {
		t.Errorf("a $0.20 budget: exit %d, stderr %q; want a note naming $2.50 and the model", code, errOut)
	}
	if code, _, errOut := run(t, "limits", "set", "--config", cfg, "--database", db, "--org", "acme", "--daily-usd", "5"); code != 0 || errOut != "" {
		t.Errorf("a $5 budget: exit %d, stderr %q; want no note", code, errOut)
	}
	if code, _, errOut := run(t, "limits", "set", "--database", db, "--org", "acme", "--monthly-usd", "0.01"); code != 0 || errOut != "" {
		t.Errorf("no prices: exit %d, stderr %q; want no note", code, errOut)
	}
}
