package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// inDir writes promptkit.yaml (when yaml is not empty) into a new folder
// and returns the folder and the config's path.
func inDir(t *testing.T, yaml string) (dir, cfg string) {
	t.Helper()
	dir = t.TempDir()
	cfg = filepath.Join(dir, "promptkit.yaml")
	if yaml != "" {
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, cfg
}

// expect runs the CLI and checks the exit code and that stderr (or
// stdout, for exit 0) contains every want.
func expect(t *testing.T, code int, args []string, want ...string) string {
	t.Helper()
	got, out, errOut := run(t, args...)
	text := errOut + out
	if got != code {
		t.Fatalf("promptkit %s: exit %d, want %d\n%s", strings.Join(args, " "), got, code, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("promptkit %s: output lacks %q:\n%s", strings.Join(args, " "), w, text)
		}
	}
	return text
}

// Every command finds the database the same way: --database, then
// service.database in the config, then promptkit.db.
func TestEveryCommandUsesServiceDatabase(t *testing.T) {
	t.Parallel()
	dir, cfg := inDir(t, "")
	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(cfg, []byte("service:\n  database: "+other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, 0, []string{"migrate", "--config", cfg}, "other.db: applied")
	expect(t, 0, []string{"submit", "--config", cfg, "--text", "hi"}, "queued")
	expect(t, 0, []string{"jobs", "list", "--config", cfg}, "queued")
	expect(t, 0, []string{"tokens", "create", "--config", cfg, "--org", "o", "--user", "u"}, "pk_")
	if _, err := os.Stat(filepath.Join(dir, "promptkit.db")); err == nil {
		t.Fatal("a command wrote promptkit.db instead of service.database")
	}
	// The flag wins over the config.
	flagDB := filepath.Join(dir, "flag.db")
	expect(t, 0, []string{"submit", "--config", cfg, "--database", flagDB, "--text", "hi"}, "queued")
	if _, err := os.Stat(flagDB); err != nil {
		t.Fatal("--database did not win over service.database")
	}
}

// The service section is checked the same way by every command.
func TestServiceSectionChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"service:\n  databse: x.db\n", `unknown key "databse"`},
		{"service:\n  workers: many\n", "want a whole number"},
		{"service:\n  heartbeat_interval: 0s\n", "must all be above zero"},
		{"service:\n  workers: -1\n", "workers -1 is negative"},
	} {
		_, cfg := inDir(t, c.yaml)
		for _, args := range [][]string{
			{"submit", "--config", cfg, "--text", "hi"},
			{"jobs", "list", "--config", cfg},
			{"migrate", "--config", cfg},
			{"worker", "--once", "--config", cfg},
		} {
			expect(t, 2, args, c.want, "promptkit.yaml")
		}
	}
}

// What no worker could run is refused at submission, exit 2.
func TestSubmitRefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	dir, _ := inDir(t, "")
	db := filepath.Join(dir, "s.db")
	expect(t, 2, []string{"submit", "--database", db, "--text", "x", "--profile", "nope"}, `profile not found`)
	expect(t, 2, []string{"submit", "--database", db, "--text", "   "}, "set text or prompt_ref")
	expect(t, 2, []string{"submit", "--database", db, "--text", "x", "--max-attempts", "-5"}, "max_attempts: must be from 1 to 25")
	if _, err := os.Stat(db); err == nil {
		t.Fatal("a refused submission created the database")
	}
	_, bad := inDir(t, "backends: [\n")
	expect(t, 2, []string{"submit", "--database", db, "--config", bad, "--text", "x"}, "promptkit.yaml")
}

// Impossible service values are refused; serve --workers 0 runs the API
// only, and worker --workers 0 is refused.
func TestImpossibleServiceFlags(t *testing.T) {
	t.Parallel()
	dir, _ := inDir(t, "")
	db := filepath.Join(dir, "f.db")
	for _, args := range [][]string{
		{"serve", "--database", db, "--workers", "-1"},
		{"serve", "--database", db, "--heartbeat-interval", "0"},
		{"serve", "--database", db, "--job-timeout", "-1s"},
		{"worker", "--database", db, "--shutdown-grace", "-1s"},
	} {
		expect(t, 2, args)
	}
	expect(t, 2, []string{"worker", "--database", db, "--workers", "0"}, "serve --workers 0 runs the API only")
}

// Read-only commands never create a database; bad database names are
// named in the error.
func TestDatabaseNames(t *testing.T) {
	t.Parallel()
	dir, _ := inDir(t, "")
	typo := filepath.Join(dir, "typo.bd")
	expect(t, 1, []string{"jobs", "list", "--database", typo}, "no database at "+typo)
	if _, err := os.Stat(typo); err == nil {
		t.Fatal("jobs list created the database it was asked to read")
	}
	expect(t, 2, []string{"jobs", "list", "--database", "mysql://u:secret@h/db"}, "unknown scheme mysql://")
	text := expect(t, 2, []string{"submit", "--database", "mysql://u:secret@h/db", "--text", "x"})
	if strings.Contains(text, "secret") {
		t.Fatalf("the error shows the URL's password: %s", text)
	}
	expect(t, 2, []string{"submit", "--database", dir, "--text", "x"}, dir+" is a folder")
	expect(t, 2, []string{"submit", "--database", filepath.Join(dir, "no", "such", "x.db"), "--text", "x"}, "folder "+filepath.Join(dir, "no", "such")+" does not exist")
	fresh := filepath.Join(dir, "fresh.db")
	expect(t, 0, []string{"migrate", "--database", fresh}, "applied", "now at version")
	expect(t, 0, []string{"migrate", "--database", fresh}, "up to date; no migration to apply")
	corrupt := filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(corrupt, []byte(strings.Repeat("not a database ", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, 1, []string{"jobs", "list", "--database", corrupt}, "database "+corrupt+":", "not a database")
}

// Messages speak of what the user did: cancel and retry say why they
// cannot, and a failure's cause is on the one line printed.
func TestOperationMessages(t *testing.T) {
	t.Parallel()
	dir, _ := inDir(t, "")
	db := filepath.Join(dir, "m.db")
	out := expect(t, 0, []string{"submit", "--database", db, "--text", "x"})
	id := regexp.MustCompile(`job (\S+) queued`).FindStringSubmatch(out)[1]
	expect(t, 0, []string{"jobs", "cancel", id, "--database", db})
	expect(t, 1, []string{"jobs", "cancel", id, "--database", db}, "job "+id+" is cancelled: only queued or running jobs can be cancelled")
	expect(t, 0, []string{"jobs", "retry", id, "--database", db, "--priority", "7"})
	expect(t, 1, []string{"jobs", "retry", id, "--database", db}, "job "+id+" is superseded: a retry replaced it with job ")
	expect(t, 1, []string{"jobs", "cancel", "nope", "--database", db}, "no job nope")
	expect(t, 2, []string{"jobs", "cancel", "--database", db}, "give a JOB_ID, or filter flags (--state, --org")
	expect(t, 2, []string{"jobs", "retry", "--database", db, "--yes"}, "give a JOB_ID, or filter flags")
	expect(t, 2, []string{"jobs", "cancel", id, "--org", "x", "--database", db}, "give a JOB_ID or filter flags, not both")
	expect(t, 2, []string{"jobs", "retry", id, "--database", db, "--priority", "101"}, "want 0–100")

	// A multi-line cause ends the one line instead of being cut off.
	if got := oneLine(multiLine{}); got != "config x.yaml: service: line 3: bad; line 4: worse" {
		t.Fatalf("oneLine = %q", got)
	}
}

type multiLine struct{}

func (multiLine) Error() string {
	return "promptkit: config x.yaml: service: promptkit: line 3: bad\n  line 4: worse\n"
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	expect(t, 0, []string{"--version"}, "promptkit version ")
	expect(t, 2, []string{"fake-provider", "--database", "x.db"}, "unknown flag: --database")
	expect(t, 0, []string{"jobs", "list", "--help"}, "queued, running, succeeded, failed, cancelled, superseded")
	for _, c := range []string{"worker", "submit", "migrate"} {
		if out := expect(t, 0, []string{c, "--help"}); strings.Count(out, "\n") < 12 {
			t.Errorf("%s --help has no long description:\n%s", c, out)
		}
	}
}

// A relative service.database is relative to the config file's folder.
func TestServiceDatabaseRelativeToConfig(t *testing.T) {
	t.Parallel()
	dir, cfg := inDir(t, "service:\n  database: data/jobs.db\n")
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, 0, []string{"migrate", "--config", cfg}, filepath.Join(dir, "data", "jobs.db"))
}
