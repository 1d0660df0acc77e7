package jobs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs"
)

// FuzzParseExecutionOptions: anything is either refused with ErrInvalid
// or parsed into options whose encoding parses to the same options.
func FuzzParseExecutionOptions(f *testing.F) {
	for _, s := range []string{`{}`, ``, `{"model":"m","depth":2,"prefer_provider":"b"}`, `{"depth":-1}`,
		`{"router_model":"r"}`, `{"profile":"p"}`, `[]`, `{"model":1}`, `{"depth":1.5}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := jobs.ParseExecutionOptions(raw)
		if err != nil {
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("%q: error %v does not match ErrInvalid", raw, err)
			}
			return
		}
		back, err := jobs.ParseExecutionOptions(o.JSON())
		if err != nil || back.Model != o.Model || back.PreferProvider != o.PreferProvider ||
			(back.Depth == nil) != (o.Depth == nil) || (o.Depth != nil && *back.Depth != *o.Depth) {
			t.Fatalf("%q → %+v → %s → %+v, %v", raw, o, o.JSON(), back, err)
		}
	})
}

// FuzzDecodeCursor: a cursor that decodes encodes to one that decodes to
// the same position; anything else is ErrInvalid.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(jobs.Cursor{CreatedAt: time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC), ID: "0193-abc"}.String())
	for _, s := range []string{"", "!!!", "MTIz", "MTIzLw", "LTEvYQ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := jobs.DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("%q: error %v does not match ErrInvalid", s, err)
			}
			return
		}
		back, err := jobs.DecodeCursor(c.String())
		if err != nil || !back.CreatedAt.Equal(c.CreatedAt) || back.ID != c.ID {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, c, c.String(), back, err)
		}
	})
}
