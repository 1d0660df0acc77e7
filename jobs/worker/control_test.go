package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/internal/testkit/enginekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
	"github.com/promptkit/promptkit/providertest"
)

// A worker reports itself on its heartbeat and, asked to drain
// (jobs.Store.DrainWorker), claims nothing more, RunNow included, while
// its running job finishes; it is then Drained. Undone, it claims again.
func TestDrainStopsClaimingAndResumes(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		w := f.worker("w1", func(c *worker.Config) { c.HeartbeatInterval = 20 * time.Millisecond }) // reports come soon
		release := make(chan struct{})
		f.srv.Enqueue(providertest.Response{Status: 200, Text: "first", Hold: release})
		f.start(w)
		f.waitFor("the worker's first report", func() bool {
			ws, err := f.store.Workers(f.ctx, t0)
			return err == nil && len(ws) == 1 && ws[0].Worker == "w1"
		})
		first := f.enqueue(jobs.EnqueueParams{Text: "first"})
		f.arrivals(1) // running, held by the provider
		if _, err := f.store.DrainWorker(f.ctx, "w1", true); err != nil {
			t.Fatal(err)
		}
		f.waitFor("the worker to learn of the drain", w.Draining)
		second := f.enqueue(jobs.EnqueueParams{Text: "second"})
		if _, _, err := w.RunNow(f.ctx, jobs.EnqueueParams{OrgID: "org", CreatedBy: "tester", Text: "now"}); !errors.Is(err, jobs.ErrNoSlot) {
			t.Errorf("RunNow while draining: %v, want ErrNoSlot", err)
		}
		select {
		case <-w.Drained():
			t.Fatal("drained with a job running")
		default:
		}
		close(release)
		f.waitState(first.JobID, jobs.Succeeded)
		select {
		case <-w.Drained():
		case <-f.ctx.Done():
			t.Fatal("never drained")
		}
		if j := f.job(second.JobID); j.State != jobs.Queued {
			t.Fatalf("a draining worker's queue: second job %s, want queued", j.State)
		}
		if ws, _ := f.store.Workers(f.ctx, t0); len(ws) != 1 || !ws[0].Draining {
			t.Errorf("Workers while draining = %+v", ws)
		}
		if _, err := f.store.DrainWorker(f.ctx, "w1", false); err != nil {
			t.Fatal(err)
		}
		f.waitState(second.JobID, jobs.Succeeded)
		select {
		case <-w.Drained():
			t.Error("still drained after the drain was undone")
		default:
		}
	})
}

// Jobs of a profile whose only backend an operator holds stay queued:
// the worker's claims skip them (promptkit.Engine.HeldProfiles); once
// released, they run.
func TestHeldProfileStaysQueued(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		eng := f.engine(0)
		if err := f.store.HoldBackend(f.ctx, enginekit.BackendID, true); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = eng.SharePacing(ctx, worker.PacingStore(f.store), promptkit.SharePacingOptions{Wake: f.store.Notifier().Notify(ctx)})
		}()
		t.Cleanup(func() { cancel(); <-done })
		f.waitFor("the engine to read the hold", func() bool { return eng.Pacing()[enginekit.BackendID].Held })
		w := f.worker("w1", func(c *worker.Config) { c.Engine = eng })
		named := f.enqueue(jobs.EnqueueParams{Text: "named", Profile: enginekit.ProfileID})
		def := f.enqueue(jobs.EnqueueParams{Text: "default"})
		f.runOnce(w, 0)
		for _, id := range []string{named.JobID, def.JobID} {
			if j := f.job(id); j.State != jobs.Queued {
				t.Fatalf("job %s of a held profile: %s, want queued", id, j.State)
			}
		}
		if err := f.store.HoldBackend(f.ctx, enginekit.BackendID, false); err != nil {
			t.Fatal(err)
		}
		f.waitFor("the engine to read the release", func() bool { return !eng.Pacing()[enginekit.BackendID].Held })
		f.runOnce(w, 1)
		f.runOnce(w, 1)
		f.waitState(named.JobID, jobs.Succeeded)
		f.waitState(def.JobID, jobs.Succeeded)
	})
}
