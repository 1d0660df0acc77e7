package promptkit

import (
	"context"
	"encoding/json"
	"time"
)

// NewWithSeams builds an engine with a private clock, jitter and
// cancellable wait, so this package's external tests can drive retries and
// backoff without sleeping. It exists only in tests.
func NewWithSeams(cfg Config, now func() time.Time, jitter func(time.Duration) time.Duration, wait func(context.Context, time.Duration) error) (*Engine, error) {
	return newEngine(cfg, seams{now: now, jitter: jitter, wait: wait})
}

// NewWithFailures builds an engine whose run IDs come from newID and, when
// validateErr is non-nil, whose output validation fails to run with it:
// failures the public API cannot provoke.
func NewWithFailures(cfg Config, newID func() (string, error), validateErr error) (*Engine, error) {
	sm := seams{newID: newID}
	if validateErr != nil {
		sm.validate = func(*compiledSchema, string) (json.RawMessage, []string, error) { return nil, nil, validateErr }
	}
	return newEngine(cfg, sm)
}
