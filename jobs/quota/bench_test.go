package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit/storekit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/jobs/quota"
	"github.com/promptkit/promptkit/pktype"
)

// BenchmarkAdmit is what a limit costs a request, on each store: a
// subject without a limit (the cached limits alone), a request under a
// requests per minute (a reservation: one write transaction under the
// org's lock) and a call under a budget (a reservation, its check reading
// the ledger, and its release), one at a time and from 8 goroutines of
// one org (which the org's lock serialises).
func BenchmarkAdmit(b *testing.B) {
	for _, k := range storekit.Kinds {
		b.Run(string(k), func(b *testing.B) {
			st := k.New(b).Open(b, jobs.Options{})
			ctx := context.Background()
			for _, l := range []jobs.Limit{
				// Never reached: every admission reserves and passes.
				{Scope: jobs.LimitOrg, Subject: "rpm", RequestsPerMinute: 1 << 30},
				{Scope: jobs.LimitOrg, Subject: "budget", DailyUSD: 1e9},
			} {
				if _, err := st.SetLimit(ctx, l); err != nil {
					b.Fatal(err)
				}
			}
			q := quota.New(quota.Config{Store: st, CacheFor: time.Hour})
			est := pktype.CallEstimate{Tokens: 100, Cost: pktype.Cost{USD: 0.001, Known: true}}
			cases := map[string]func() error{
				"no-limit": func() error { _, err := q.Admit(ctx, quota.Subject{Org: "free"}); return err },
				"rpm":      func() error { _, err := q.Admit(ctx, quota.Subject{Org: "rpm"}); return err },
				"call-budget": func() error {
					r, err := q.Call(ctx, quota.Subject{Org: "budget"}, est, time.Minute)
					if err == nil {
						err = r.Release(ctx)
					}
					return err
				},
			}
			for _, name := range []string{"no-limit", "rpm", "call-budget"} {
				admit := cases[name]
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						if err := admit(); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(fmt.Sprint(name, "-parallel8"), func(b *testing.B) {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := admit(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}
