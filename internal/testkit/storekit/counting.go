package storekit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/promptkit/promptkit/jobs"
)

// Counting is a jobs.Store that counts the calls of the read methods
// tests make claims about (Counted lists them) and passes every call,
// counted or not, to the store it wraps. It is safe for concurrent use.
type Counting struct {
	jobs.Store
	mu sync.Mutex
	n  map[string]int
}

// Counted lists the methods a Counting counts.
var Counted = []string{
	"ChangesSince", "EventsAfter", "GetJob", "GetPrompt", "GetPrompts", "GetResponse", "GetResponses",
	"JobEvents", "ListJobs", "PromptJobs", "Thread",
}

// Count wraps st in a Counting.
func Count(st jobs.Store) *Counting { return &Counting{Store: st, n: map[string]int{}} }

// Calls returns how many times method was called since the last Take. It
// panics for a method not in Counted: a count of zero must mean no call,
// never a method nobody counts.
func (c *Counting) Calls(method string) int {
	if !slices.Contains(Counted, method) {
		panic(fmt.Sprintf("storekit: Counting does not count %s; it counts %s", method, strings.Join(Counted, ", ")))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// Take returns the counts so far, by method (a method never called is
// absent), and starts again from zero.
func (c *Counting) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := maps.Clone(c.n)
	clear(c.n)
	return n
}

func (c *Counting) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

func (c *Counting) ChangesSince(ctx context.Context, p jobs.ChangesParams) (jobs.Changes, error) {
	c.add("ChangesSince")
	return c.Store.ChangesSince(ctx, p)
}

func (c *Counting) EventsAfter(ctx context.Context, p jobs.EventsParams) ([]jobs.Event, error) {
	c.add("EventsAfter")
	return c.Store.EventsAfter(ctx, p)
}

func (c *Counting) GetJob(ctx context.Context, orgID, id string) (jobs.Job, error) {
	c.add("GetJob")
	return c.Store.GetJob(ctx, orgID, id)
}

func (c *Counting) GetPrompt(ctx context.Context, orgID, id string) (jobs.Prompt, error) {
	c.add("GetPrompt")
	return c.Store.GetPrompt(ctx, orgID, id)
}

func (c *Counting) GetPrompts(ctx context.Context, orgID string, ids []string) (map[string]jobs.Prompt, error) {
	c.add("GetPrompts")
	return c.Store.GetPrompts(ctx, orgID, ids)
}

func (c *Counting) GetResponse(ctx context.Context, orgID, id string) (jobs.Response, error) {
	c.add("GetResponse")
	return c.Store.GetResponse(ctx, orgID, id)
}

func (c *Counting) GetResponses(ctx context.Context, orgID string, ids []string) (map[string]jobs.Response, error) {
	c.add("GetResponses")
	return c.Store.GetResponses(ctx, orgID, ids)
}

func (c *Counting) JobEvents(ctx context.Context, orgID, jobID string) ([]jobs.Event, error) {
	c.add("JobEvents")
	return c.Store.JobEvents(ctx, orgID, jobID)
}

func (c *Counting) ListJobs(ctx context.Context, p jobs.ListParams) (jobs.JobPage, error) {
	c.add("ListJobs")
	return c.Store.ListJobs(ctx, p)
}

func (c *Counting) PromptJobs(ctx context.Context, orgID, promptID string) ([]jobs.Job, error) {
	c.add("PromptJobs")
	return c.Store.PromptJobs(ctx, orgID, promptID)
}

func (c *Counting) Thread(ctx context.Context, p jobs.ThreadParams) ([]jobs.Turn, error) {
	c.add("Thread")
	return c.Store.Thread(ctx, p)
}
