package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/worker"
)

// firstSyncWait bounds how long a starting process waits for its first
// sync of pacing before its workers start.
const firstSyncWait = time.Second

// sharePacing shares the engine's pacing with the other processes on the
// database (Engine.SharePacing through the store) until the returned
// stop is called; wg is done once it has stopped. It returns after the
// first sync (or firstSyncWait), so that a process starting while the
// others are paused, or paced, starts so too instead of meeting 429s.
// serve and worker stop it after their worker stopped, so that the
// others keep counting this process while its last jobs run. A failing
// sync warns once, and says when it recovers.
func (rt *svc) sharePacing(ctx context.Context, wg *sync.WaitGroup) (stop func()) {
	ctx, stop = context.WithCancel(context.WithoutCancel(ctx))
	first := make(chan struct{})
	var once sync.Once
	var failing bool // only the sharing goroutine touches it
	onSync := func(err error) {
		once.Do(func() { close(first) })
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			rt.log.Warn("sharing pacing through the database failed; pacing on what this process knows, reported once until it recovers", "err", err)
		case err == nil && failing:
			failing = false
			rt.log.Info("sharing pacing through the database recovered")
		}
	}
	wg.Go(func() {
		// The store's change notifications wake the reads: on SQLite,
		// any commit of another process on the file, the pacing's own
		// included, within 10ms.
		_ = rt.engine.SharePacing(ctx, worker.PacingStore(rt.store), promptkit.SharePacingOptions{
			OnSync: onSync, Wake: rt.notifier.Notify(ctx)})
	})
	t := time.NewTimer(firstSyncWait)
	defer t.Stop()
	select {
	case <-first:
	case <-t.C:
	}
	return stop
}

// backendPacing is one backend's shared pacing as `jobs metrics --json`
// prints it.
type backendPacing struct {
	Backend string `json:"backend"`
	// RequestsPerSecond is the learned provider-wide rate now; 0: none
	// learned (or grown back to unpaced).
	RequestsPerSecond float64    `json:"requests_per_second"`
	CutAt             *time.Time `json:"cut_at,omitempty"`
	PausedUntil       *time.Time `json:"paused_until,omitempty"`
	// CooldownUntil is when model groups stop avoiding the backend after
	// it failed as unwell (docs/routing.md).
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
	// Processes are those with callers on the backend; Demand their
	// callers.
	Processes int `json:"processes"`
	Demand    int `json:"demand"`
}

// sharedPacing reads the pacing the processes on the database share.
func sharedPacing(ctx context.Context, st jobs.Store, now time.Time) ([]backendPacing, error) {
	got, err := st.SyncPacing(ctx, jobs.PacingSyncParams{})
	if err != nil {
		return nil, err
	}
	out := make([]backendPacing, 0, len(got))
	for _, b := range got {
		p := backendPacing{Backend: b.Backend, RequestsPerSecond: b.RequestsPerSecond(now)}
		if !b.Rate.At.IsZero() {
			p.CutAt = &b.Rate.At
		}
		if b.PauseUntil.After(now) {
			p.PausedUntil = &b.PauseUntil
		}
		if b.CooldownUntil.After(now) {
			p.CooldownUntil = &b.CooldownUntil
		}
		for _, pr := range b.Peers {
			if pr.Demand > 0 {
				p.Processes++
				p.Demand += pr.Demand
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// printPacing prints the shared pacing as a table; nothing when there is
// none.
func printPacing(w io.Writer, ps []backendPacing) error {
	if len(ps) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nBACKEND\tRATE (SHARED)\tLAST 429 CUT\tPAUSED UNTIL\tCOOLDOWN UNTIL\tPROCESSES\tCALLERS")
	for _, p := range ps {
		rate := "unpaced"
		if p.RequestsPerSecond > 0 {
			rate = fmt.Sprintf("%.1f/s", p.RequestsPerSecond)
		}
		var cut, paused, cool time.Time
		if p.CutAt != nil {
			cut = *p.CutAt
		}
		if p.PausedUntil != nil {
			paused = *p.PausedUntil
		}
		if p.CooldownUntil != nil {
			cool = *p.CooldownUntil
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", p.Backend, rate, fmtTime(cut), fmtTime(paused), fmtTime(cool), p.Processes, p.Demand)
	}
	return tw.Flush()
}
