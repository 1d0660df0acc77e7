package jobstest

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/promptkit/promptkit/jobs"
)

// testDeletePrompt checks DeletePrompt: a prompt whose jobs are all
// terminal goes with its jobs (a retry's superseded one included), their
// events and responses, and nothing else does; a prompt with a queued or
// running job is refused with ErrPromptActive and left whole; another
// org's prompt, an unknown one and a deleted one are ErrNotFound; refusals
// leave Check passing.
func testDeletePrompt(t *testing.T, h Harness) {
	f := setup(t, h)

	// A prompt answered, retried and answered again: two jobs, two
	// responses, and the events of both.
	gone := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Chat: chatRequest("delete me")})
	f.finishAs(gone.JobID, jobs.Succeeded)
	retry, err := f.store.Retry(f.ctx, jobs.RetryParams{OrgID: "org-a", JobID: gone.JobID})
	if err != nil {
		t.Fatal(err)
	}
	f.finishAs(retry.ID, jobs.Succeeded)
	// A prompt continuing it, and one of the same org left alone.
	child := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "a follow-up", ParentID: gone.PromptID})
	f.finishAs(child.JobID, jobs.Succeeded)
	other := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "another"})
	f.finishAs(other.JobID, jobs.Failed)
	keep := []snapshot{f.snapshot(child.JobID), f.snapshot(other.JobID)}
	allBefore := f.allEvents()

	wantErr(t, f.store.DeletePrompt(f.ctx, "org-b", gone.PromptID), jobs.ErrNotFound, "DeletePrompt from another org")
	wantErr(t, f.store.DeletePrompt(f.ctx, "org-a", "no-such-prompt"), jobs.ErrNotFound, "DeletePrompt of an unknown prompt")
	wantErr(t, f.store.DeletePrompt(f.ctx, "org-a", "a\x00b"), jobs.ErrNotFound, "DeletePrompt of an id with a NUL")
	if _, err := f.store.GetPrompt(f.ctx, "", gone.PromptID); err != nil {
		t.Fatalf("the prompt is gone after refused deletes: %v", err)
	}

	if err := f.store.DeletePrompt(f.ctx, "org-a", gone.PromptID); err != nil {
		t.Fatalf("DeletePrompt: %v", err)
	}
	_, err = f.store.GetPrompt(f.ctx, "", gone.PromptID)
	wantErr(t, err, jobs.ErrNotFound, "GetPrompt after DeletePrompt")
	_, err = f.store.PromptJobs(f.ctx, "", gone.PromptID)
	wantErr(t, err, jobs.ErrNotFound, "PromptJobs after DeletePrompt")
	for _, id := range []string{gone.JobID, retry.ID} {
		_, err = f.store.GetJob(f.ctx, "", id)
		wantErr(t, err, jobs.ErrNotFound, "GetJob after DeletePrompt")
		_, err = f.store.GetResponse(f.ctx, "", jobs.ResponseID(gone.PromptID, id))
		wantErr(t, err, jobs.ErrNotFound, "GetResponse after DeletePrompt")
		if evs, err := f.store.JobEvents(f.ctx, "", id); err == nil && len(evs) > 0 {
			t.Errorf("JobEvents after DeletePrompt: %d events", len(evs))
		}
	}
	// The log lost exactly the deleted jobs' events.
	var want []int64
	for _, e := range allBefore {
		if e.JobID != gone.JobID && e.JobID != retry.ID {
			want = append(want, e.Seq)
		}
	}
	var got []int64
	for _, e := range f.allEvents() {
		got = append(got, e.Seq)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events after DeletePrompt: seqs %v, want %v", got, want)
	}
	for _, s := range keep {
		after := f.snapshot(s.job.ID)
		if !reflect.DeepEqual(s.job, after.job) || !reflect.DeepEqual(s.events, after.events) || !reflect.DeepEqual(s.response, after.response) {
			t.Errorf("DeletePrompt changed another prompt's job %s", s.job.ID)
		}
	}
	if th, err := f.store.Thread(f.ctx, jobs.ThreadParams{PromptID: child.PromptID, Depth: 5}); err != nil || len(th) != 0 {
		t.Errorf("Thread of a prompt whose parent was deleted: %v, %v", th, err)
	}
	wantErr(t, f.store.DeletePrompt(f.ctx, "", gone.PromptID), jobs.ErrNotFound, "DeletePrompt again")

	// A queued, then running job holds its prompt; once cancelled it goes.
	busy := f.enqueue(jobs.EnqueueParams{OrgID: "org-a", Text: "busy"})
	for _, state := range []jobs.State{jobs.Queued, jobs.Running} {
		if state == jobs.Running {
			f.claimID("w", busy.JobID)
		}
		before := f.snapshot(busy.JobID)
		err := f.store.DeletePrompt(f.ctx, "org-a", busy.PromptID)
		if !errors.Is(err, jobs.ErrPromptActive) || !errors.Is(err, jobs.ErrIllegalTransition) {
			t.Errorf("DeletePrompt of a prompt with a %s job: %v, want ErrPromptActive", state, err)
		}
		f.unchanged(before, "a refused DeletePrompt")
	}
	if err := f.store.Check(f.ctx); err != nil {
		t.Errorf("Check after refused deletes: %v", err)
	}
	if _, err := f.store.Cancel(f.ctx, jobs.CancelParams{JobID: busy.JobID}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.DeletePrompt(f.ctx, "", busy.PromptID); err != nil {
		t.Errorf("DeletePrompt of a cancelled prompt: %v", err)
	}
	if err := f.store.Check(f.ctx); err != nil {
		t.Errorf("Check after DeletePrompt: %v", err)
	}
}
