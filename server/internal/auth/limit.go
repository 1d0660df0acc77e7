package auth

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is a token bucket per key: the per-identity and per-org
// submission budgets, and the per-org budget of token creation. Buckets
// of keys idle long enough to be full again are dropped, so the map stays
// as small as the set of recently active keys.
type limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	swept   time.Time
}

// newLimiter is nil (no limit) for a negative rate.
func newLimiter(perSecond float64, burst int, now func() time.Time) *limiter {
	if perSecond < 0 {
		return nil
	}
	return &limiter{rate: rate.Limit(perSecond), burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// take takes one from key's bucket at now. When the bucket is empty it
// takes nothing and returns how long until one is available; otherwise
// undo puts the one taken back (a request refused by another bound
// spends none of this one).
func (l *limiter) take(now time.Time, key string) (undo func(), delay time.Duration) {
	if l == nil {
		return func() {}, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	// Reserved under mu: sweep cannot drop the bucket in between.
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return nil, time.Duration(math.MaxInt64) // a burst of 0: never
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d
	}
	// While r holds a token the bucket is not full, so sweep keeps it.
	return func() { r.CancelAt(now) }, 0
}

// sweep drops full buckets, at most once per refill period; l.mu is held.
func (l *limiter) sweep(now time.Time) {
	full := time.Duration(float64(l.burst) / float64(l.rate) * float64(time.Second))
	if now.Sub(l.swept) < full {
		return
	}
	l.swept = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}
