package jobs

import "context"

// Await is the one way promptkit waits for something in the store to
// happen (a job to end, a batch to finish): it looks at once, then again
// at every value from wake (a notification, coalesced), until look
// reports done. When end fires it looks a last time and returns that,
// done or not; when ctx ends it returns the last value with ctx's error.
// A closed wake stops waking, not waiting: end or ctx still end the wait.
// Every wake re-reads, so a missed or coalesced notification costs a
// look, never a lost change.
func Await[T any](ctx context.Context, wake <-chan struct{}, end <-chan struct{}, look func(context.Context) (T, bool, error)) (T, error) {
	for {
		v, done, err := look(ctx)
		if err != nil || done {
			return v, err
		}
		select {
		case _, open := <-wake:
			if !open {
				wake = nil
			}
		case <-end:
			v, _, err := look(ctx)
			return v, err
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// AwaitJob waits (see Await) until the job is terminal, following a
// retry that supersedes it to the retry: the answer a caller waits for is
// its prompt's. It returns the job as it last read it; wake should signal
// changes of the prompt's jobs (Notifier.Notify does, among others).
func AwaitJob(ctx context.Context, st Store, org, jobID string, wake <-chan struct{}, end <-chan struct{}) (Job, error) {
	return Await(ctx, wake, end, func(ctx context.Context) (Job, bool, error) {
		j, err := st.GetJob(ctx, org, jobID)
		if err != nil || j.State != Superseded {
			return j, err == nil && j.State.Terminal(), err
		}
		js, err := st.PromptJobs(ctx, org, j.PromptID)
		if err != nil {
			return j, false, err
		}
		if len(js) == 0 {
			return j, false, ErrNotFound // archived meanwhile
		}
		j = js[len(js)-1]
		jobID = j.ID
		return j, j.State.Terminal(), nil
	})
}
