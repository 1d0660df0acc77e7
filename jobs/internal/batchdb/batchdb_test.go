package batchdb

import (
	"errors"
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
