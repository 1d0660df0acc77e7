package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLatest(t *testing.T) {
	fsys := fstest.MapFS{
		"00001_init.sql":  {},
		"00010_later.sql": {},
		"00002_next.sql":  {},
		"README.md":       {},
	}
	if v, err := Latest(fsys); err != nil || v != 10 {
		t.Errorf("Latest = %d, %v; want 10", v, err)
	}
	if _, err := Latest(fstest.MapFS{}); err == nil {
		t.Error("Latest of no migrations: no error")
	}
	if _, err := Latest(fstest.MapFS{"init.sql": {}}); err == nil {
		t.Error("Latest of a file without a version: no error")
	}
}

func TestCheck(t *testing.T) {
	if err := Check(3, 3); err != nil {
		t.Errorf("Check(3, 3) = %v", err)
	}
	for _, c := range []struct {
		have, want int64
		says       string
	}{{2, 3, "older"}, {4, 3, "newer"}} {
		err := Check(c.have, c.want)
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Have != c.have || ve.Want != c.want {
			t.Errorf("Check(%d, %d) = %v, want a *VersionError", c.have, c.want, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.says) || !strings.Contains(msg, fmt.Sprint(c.have)) || !strings.Contains(msg, fmt.Sprint(c.want)) {
			t.Errorf("Check(%d, %d) = %q: should say %q and name both versions", c.have, c.want, msg, c.says)
		}
	}
}
