package batchdb

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// StampSet stamps one column per status a batch can move to, and none for
// validating (created_at is set once).
func TestStampSet(t *testing.T) {
	set := StampSet("$to", "$now")
	for _, s := range []jobs.BatchStatus{jobs.BatchInProgress, jobs.BatchFinalizing, jobs.BatchCompleted,
		jobs.BatchFailed, jobs.BatchExpired, jobs.BatchCancelling, jobs.BatchCancelled} {
		if !strings.Contains(set, "WHEN '"+string(s)+"' THEN $now") {
			t.Errorf("StampSet stamps nothing for %s:\n%s", s, set)
		}
	}
	if strings.Contains(set, "'validating'") {
		t.Errorf("StampSet stamps validating:\n%s", set)
	}
}

// No errors are stored as nothing; others come back as they were.
func TestErrorsStoredForm(t *testing.T) {
	for _, errs := range [][]jobs.BatchError{nil, {}} {
		if b, err := EncodeErrors(errs); b != nil || err != nil {
			t.Errorf("EncodeErrors(%#v) = %q, %v; want nothing", errs, b, err)
		}
	}
	want := []jobs.BatchError{{Code: "c", Message: "m", Param: "p", Line: 3, CustomID: "x"}}
	b, err := EncodeErrors(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeErrors(b)
	if err != nil || len(got) != 1 || got[0] != want[0] {
		t.Errorf("DecodeErrors(EncodeErrors(%+v)) = %+v, %v", want, got, err)
	}
	if got, err := DecodeErrors(nil); got != nil || err != nil {
		t.Errorf("DecodeErrors(nil) = %+v, %v", got, err)
	}
}

// ScanProgress: a batch that does not exist is ErrNotFound.
func TestScanProgress(t *testing.T) {
	row := func(vals ...int) func(dest ...any) error {
		return func(dest ...any) error {
			for i, d := range dest {
				*d.(*int) = vals[i]
			}
			return nil
		}
	}
	if _, err := ScanProgress(row(0, 0, 0, 0, 0, 0)); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("ScanProgress of no batch = %v, want ErrNotFound", err)
	}
	p, err := ScanProgress(row(1, 5, 1, 2, 1, 1))
	if want := (jobs.BatchProgress{Lines: 5, Succeeded: 1, Failed: 2, Cancelled: 1, Unfinished: 1}); err != nil || p != want {
		t.Errorf("ScanProgress = %+v, %v; want %+v", p, err, want)
	}
}

// The active statuses are exactly the ones that are not terminal.
func TestActiveStatuses(t *testing.T) {
	want := []jobs.BatchStatus{jobs.BatchValidating, jobs.BatchInProgress, jobs.BatchFinalizing, jobs.BatchCancelling}
	if got := ActiveStatuses(); !slices.Equal(got, want) {
		t.Errorf("ActiveStatuses() = %v, want %v", got, want)
	}
	if want := "status IN ('validating', 'in_progress', 'finalizing', 'cancelling')"; ActiveWhere != want {
		t.Errorf("ActiveWhere = %q, want %q", ActiveWhere, want)
	}
}

// Each store's partial index of active batches, as its migrations last
// declare it, has ActiveWhere for its predicate: the active batches'
// query (which uses ActiveWhere) implies it, so PostgreSQL and SQLite
// may read it through the index. A change to ActiveStatuses fails here
// until a migration rebuilds both indexes.
func TestActiveWhereMatchesIndexes(t *testing.T) {
	for _, c := range []struct{ dir, index string }{
		{"../../pgstore/migrations", "batches_active_idx"},
		{"../../sqlitestore/migrations", "batches_active"},
	} {
		files, err := filepath.Glob(filepath.Join(c.dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("migrations in %s: %v, %v", c.dir, files, err)
		}
		slices.Sort(files)
		// The index's last CREATE, up to the Down section of its file.
		create := regexp.MustCompile(`(?is)CREATE INDEX (?:IF NOT EXISTS )?` + c.index + `\s+ON batches \(created_at, id\)\s+WHERE\s+(.*?);`)
		pred := ""
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			up, _, _ := strings.Cut(string(b), "-- +goose Down")
			if m := create.FindAllStringSubmatch(up, -1); m != nil {
				pred = strings.Join(strings.Fields(m[len(m)-1][1]), " ")
			}
		}
		if pred != ActiveWhere {
			t.Errorf("%s's predicate in %s is %q, want ActiveWhere %q", c.index, c.dir, pred, ActiveWhere)
		}
	}
}
