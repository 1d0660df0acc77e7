package auth

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is the per-identity submission budget: a token bucket per key.
// Buckets of identities idle long enough to be full again are dropped, so
// the map stays as small as the set of recently active tokens.
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

// allow takes one submission from key's bucket; when empty it returns
// false and how long until one is available.
func (l *limiter) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops full buckets, at most once per refill period.
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
