package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	c := NewClock(start)
	if c.Now() != start || c.Now() != start {
		t.Fatalf("Now = %v, want %v twice", c.Now(), start)
	}
	if got := c.Advance(time.Second); got != start.Add(time.Second) || c.Now() != got {
		t.Fatalf("Advance returned %v, Now %v; want %v", got, c.Now(), start.Add(time.Second))
	}
	if got := c.Advance(-time.Hour); got != start.Add(time.Second-time.Hour) {
		t.Fatalf("Advance backwards: %v", got)
	}
	c.Set(start)
	if c.Now() != start {
		t.Fatalf("after Set: %v", c.Now())
	}
}

func TestTickingClockNeverRepeats(t *testing.T) {
	t.Parallel()
	c := NewClock(start, Ticking(time.Microsecond))
	a, b := c.Now(), c.Now()
	if a != start.Add(time.Microsecond) || b != a.Add(time.Microsecond) {
		t.Fatalf("readings %v, %v; want one step after the other", a, b)
	}
	if got := c.Advance(time.Second); got != b.Add(time.Second) {
		t.Fatalf("Advance on a ticking clock: %v", got)
	}
}

// Concurrent readings of a ticking clock are all distinct, and the clock
// ends exactly n steps on (run under -race).
func TestClockConcurrentUse(t *testing.T) {
	t.Parallel()
	c := NewClock(start, Ticking(time.Nanosecond))
	const n = 8 * 100
	seen := make(chan time.Time, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				seen <- c.Now()
			}
		})
	}
	wg.Wait()
	close(seen)
	distinct := map[time.Time]bool{}
	for s := range seen {
		distinct[s] = true
	}
	if len(distinct) != n {
		t.Fatalf("%d distinct readings of %d", len(distinct), n)
	}
	if got := c.Advance(0); got != start.Add(n*time.Nanosecond) {
		t.Fatalf("clock at %v, want %v", got, start.Add(n*time.Nanosecond))
	}
}

func TestClockWaitRecordsAndAdvances(t *testing.T) {
	t.Parallel()
	c := NewClock(start)
	if err := c.Wait(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if c.Now() != start.Add(2*time.Second) {
		t.Fatalf("after waits: %v", c.Now())
	}
	if w := c.Waits(); len(w) != 2 || w[0] != 2*time.Second || w[1] != 0 {
		t.Fatalf("Waits = %v", w)
	}
	if c.Jitter(time.Minute) != time.Minute {
		t.Fatal("Jitter is not the top of its range")
	}
	// A hook runs first; its error is Wait's and the clock stays.
	errHook := errors.New("hook")
	var got []time.Duration
	c.OnWait(func(_ context.Context, d time.Duration) error { got = append(got, d); return errHook })
	if err := c.Wait(context.Background(), time.Hour); !errors.Is(err, errHook) || c.Now() != start.Add(2*time.Second) {
		t.Fatalf("hooked wait: %v, clock %v", err, c.Now())
	}
	// A hook returning nil lets the wait go on; an ended context stops it.
	c.OnWait(func(context.Context, time.Duration) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) || c.Now() != start.Add(2*time.Second) {
		t.Fatalf("wait on an ended context: %v, clock %v", err, c.Now())
	}
	c.OnWait(nil)
	if err := c.Wait(context.Background(), time.Minute); err != nil || c.Now() != start.Add(2*time.Second+time.Minute) {
		t.Fatalf("unhooked wait: %v, clock %v", err, c.Now())
	}
	if len(got) != 1 || got[0] != time.Hour || len(c.Waits()) != 5 {
		t.Fatalf("hook saw %v; Waits %v", got, c.Waits())
	}
}

func TestLogsCapture(t *testing.T) {
	t.Parallel()
	var l Logs
	if l.Lines() != nil || l.Len() != 0 {
		t.Fatalf("empty Logs: %q", l.Lines())
	}
	l.Logger().Info("first", "n", 1)
	l.Logger().Debug("hidden")
	l.DebugLogger().Debug("shown")
	fmt.Fprint(&l, "partial")
	lines := l.Lines()
	if len(lines) != 2 || !l.Contains(`msg=first n=1`) || l.Contains("hidden") || !l.Contains("level=DEBUG msg=shown") {
		t.Fatalf("lines %q", lines)
	}
	if l.Count("msg=") != 2 {
		t.Fatalf("Count = %d", l.Count("msg="))
	}
	l.Reset()
	if l.String() != "" {
		t.Fatalf("after Reset: %q", l.String())
	}
}

// Writes from many goroutines all arrive, whole (run under -race).
func TestLogsConcurrentWrites(t *testing.T) {
	t.Parallel()
	var l Logs
	log := l.Logger()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				log.Info("line", "g", g, "i", i)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := l.Notify(ctx)
	wg.Wait()
	if n := len(l.Lines()); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
	if _, ok := <-ch; !ok {
		t.Fatal("no signal after writes")
	}
	cancel()
	for range ch { // drains a pending signal, then sees the close
	}
}

// Until wakes on a source's signal: with the fallback tick an hour away,
// only the write can make it look again.
func TestUntilWakesOnSource(t *testing.T) {
	t.Parallel()
	var l Logs
	looked := make(chan struct{}, 1)
	go func() {
		<-looked
		l.Logger().Info("ready")
	}()
	ok := until(t.Context(), time.Minute, time.Hour, func() bool {
		select {
		case looked <- struct{}{}:
		default:
		}
		return l.Contains("msg=ready")
	}, &l)
	if !ok {
		t.Fatal("Until did not wake on the write")
	}
}

// A closed channel wakes Until once, not in a loop.
func TestUntilClosedSourceWakesOnce(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	close(done)
	looks := 0
	// Spinning on the closed channel would reach the thousandth look.
	if until(t.Context(), 100*time.Millisecond, time.Hour, func() bool { looks++; return looks >= 1000 }, Chan(done)) {
		t.Fatalf("Until looked %d times on a closed channel", looks)
	}
}

// Until looks on the fallback tick when nothing signals, and gives up at
// its timeout.
func TestUntilFallbackAndTimeout(t *testing.T) {
	t.Parallel()
	looks := 0
	if !until(t.Context(), time.Minute, time.Millisecond, func() bool { looks++; return looks == 3 }) {
		t.Fatal("the fallback tick never made Until look again")
	}
	if Until(t.Context(), time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if Until(ctx, time.Hour, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
}
