package storeops

import (
	"context"

	"github.com/promptkit/promptkit/jobs"
)

// SetLimit stores a limit, replacing the scope and subject's. See
// jobs.Store.
func (o Ops) SetLimit(ctx context.Context, l jobs.Limit) (jobs.Limit, error) {
	l, err := l.Normalize()
	if err != nil {
		return jobs.Limit{}, o.fail("set limit", err)
	}
	out, err := o.db.LimitUpsert(ctx, l)
	o.db.Wrote(ctx, "set limit", err, err == nil)
	if err != nil {
		return jobs.Limit{}, o.fail("set limit", err)
	}
	return out, nil
}

// DeleteLimit deletes the limit of a scope and subject. See jobs.Store.
func (o Ops) DeleteLimit(ctx context.Context, scope jobs.LimitScope, subject string) error {
	err := o.db.LimitDelete(ctx, scope, subject)
	o.db.Wrote(ctx, "delete limit", err, err == nil)
	if err != nil {
		return o.fail("delete limit", err)
	}
	return nil
}

// Limits returns every limit by scope and subject. See jobs.Store.
func (o Ops) Limits(ctx context.Context) ([]jobs.Limit, error) {
	out, err := o.db.LimitList(ctx)
	if err != nil {
		return nil, o.fail("limits", err)
	}
	return out, nil
}

// RecordCalls adds calls made for no job to the usage ledger. See
// jobs.Store.
func (o Ops) RecordCalls(ctx context.Context, p jobs.RecordCallsParams) error {
	p, err := p.Normalize()
	if err != nil {
		return o.fail("record calls", err)
	}
	if len(p.Calls) == 0 {
		return nil
	}
	err = o.db.CallsInsert(ctx, p)
	o.db.Wrote(ctx, "record calls", err, err == nil)
	if err != nil {
		return o.fail("record calls", err)
	}
	return nil
}
