package promptkit

import (
	"context"
	"time"
)

// NewWithSeams builds an engine with a private clock, jitter and
// cancellable wait, so this package's external tests can drive retries and
// backoff without sleeping. It exists only in tests.
func NewWithSeams(cfg Config, now func() time.Time, jitter func(time.Duration) time.Duration, wait func(context.Context, time.Duration) error) (*Engine, error) {
	return newEngine(cfg, seams{now: now, jitter: jitter, wait: wait})
}
