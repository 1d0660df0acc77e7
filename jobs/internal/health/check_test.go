package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/jobs/internal/schema"
)

// Check: a schema other than this build's is a *schema.VersionError and
// no probe is written; a failing probe is named; then the record decides,
// at the clock's reading after the probe.
func TestCheckSteps(t *testing.T) {
	var w Writes
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	probed := 0
	probeErr := error(nil)
	p := Probe{
		Want:  func() (int64, error) { return 7, nil },
		Have:  func(context.Context) (int64, error) { return 7, nil },
		Write: func(context.Context) error { probed++; return probeErr },
	}
	clock := func() time.Time { return now }
	if err := w.Check(ctx, clock, p); err != nil || probed != 1 {
		t.Fatalf("Check = %v after %d probes", err, probed)
	}
	old := p
	old.Have = func(context.Context) (int64, error) { return 6, nil }
	var ve *schema.VersionError
	if err := w.Check(ctx, clock, old); !errors.As(err, &ve) || ve.Have != 6 || ve.Want != 7 || probed != 1 {
		t.Errorf("Check on an older schema = %v after %d probes; want a VersionError and no probe", err, probed)
	}
	probeErr = errors.New("read-only")
	if err := w.Check(ctx, clock, p); !errors.Is(err, probeErr) || !strings.Contains(err.Error(), "probe write") {
		t.Errorf("Check with a failing probe = %v", err)
	}
	probeErr = nil
	w.Record(ctx, "enqueue", errors.New("disk full"), false, clock, ctxEnded)
	if err := w.Check(ctx, clock, p); err == nil || !strings.Contains(err.Error(), "enqueue") {
		t.Errorf("Check after a failed write = %v", err)
	}
	p.Write = func(context.Context) error { now = now.Add(Window); return nil }
	if err := w.Check(ctx, clock, p); err != nil {
		t.Errorf("Check whose probe ends past the window = %v", err)
	}
}
