package promptkit_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/sqlitestore"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// An operator's hold (jobs.Store.HoldBackend) reaches an engine sharing
// its pacing through the store: a model group skips the held backend for
// the other; a profile whose only backend is held makes its call wait,
// dispatching nothing, until the hold is released; HeldProfiles names the
// profiles whose every backend is held ("" too for the default one).
func TestHeldBackend(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(routingStart)
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, b := providertest.NewServer(), providertest.NewServer()
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	eng, err := promptkit.NewWithSeams(promptkit.Config{
		DefaultProfile: "p",
		Backends:       []promptkit.Backend{{ID: "a", BaseURL: a.URL}, {ID: "b", BaseURL: b.URL}},
		Profiles: []promptkit.Profile{
			{ID: "p", Model: "m", Backends: []promptkit.ProfileBackend{{ID: "a"}, {ID: "b", Fallback: true}}},
			{ID: "q", Model: "m", Backend: "a"},
		},
	}, clock.Now, clock.Jitter, clock.Wait)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	hold := func(backend string, held bool) {
		t.Helper()
		if err := st.HoldBackend(ctx, backend, held); err != nil {
			t.Fatal(err)
		}
	}
	held := func(backend string, want bool) {
		t.Helper()
		if !testkit.Until(ctx, 10*time.Second, func() bool { return eng.Pacing()[backend].Held == want }, st.Notifier()) {
			t.Fatalf("engine's Pacing()[%s].Held never became %v", backend, want)
		}
	}
	hold("a", true)
	wg.Go(func() {
		_ = eng.SharePacing(ctx, worker.PacingStore(st), promptkit.SharePacingOptions{Peer: "e", Wake: st.Notifier().Notify(ctx)})
	})
	held("a", true) // the first sync reads the hold
	if got := eng.HeldProfiles(); !slices.Equal(got, []string{"q"}) {
		t.Errorf("HeldProfiles with a held = %q, want [q]", got)
	}
	// The group skips the held primary for its fallback.
	for range 4 {
		if res, err := eng.Run(ctx, promptkit.RunRequest{Text: "x"}); err != nil || res.BackendID != "b" {
			t.Fatalf("group run with a held: %+v, %v; want b", res, err)
		}
	}
	// A's only profile waits, dispatching nothing.
	type result struct {
		res *promptkit.RunResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := eng.Run(ctx, promptkit.RunRequest{ProfileID: "q", Text: "x"})
		done <- result{res, err}
	}()
	waiting := func() bool { // its demand on a, published at once
		got, err := st.SyncPacing(ctx, jobs.PacingSyncParams{})
		if err != nil {
			return false
		}
		for _, bp := range got {
			for _, p := range bp.Peers {
				if bp.Backend == "a" && p.ID == "e" && p.Demand > 0 {
					return true
				}
			}
		}
		return false
	}
	if !testkit.Until(ctx, 10*time.Second, waiting, st.Notifier()) {
		t.Fatal("the call on held a never showed its demand")
	}
	select {
	case r := <-done:
		t.Fatalf("the call on held a returned %+v, %v", r.res, r.err)
	default:
	}
	if n := len(a.Requests()); n != 0 {
		t.Fatalf("held a got %d requests", n)
	}
	// Both held: the default profile is held too.
	clock.Advance(time.Second)
	hold("b", true)
	held("b", true)
	if got := eng.HeldProfiles(); !slices.Equal(got, []string{"", "p", "q"}) {
		t.Errorf("HeldProfiles with both held = %q, want [\"\" p q]", got)
	}
	// Released, the waiting call goes to a.
	hold("a", false)
	select {
	case r := <-done:
		if r.err != nil || r.res.BackendID != "a" {
			t.Fatalf("the call after release: %+v, %v; want a", r.res, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call on a never ran after its release")
	}
	if got := eng.HeldProfiles(); len(got) != 0 {
		t.Errorf("HeldProfiles with b held alone = %q, want none", got)
	}
	if n := len(a.Requests()); n != 1 {
		t.Errorf("a got %d requests after release, want 1", n)
	}
}
