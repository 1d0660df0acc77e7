package events

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/promptkit/promptkit/server/internal/auth"
)

// TestStreamsFairPerOrg: one org opening streams with many tokens is
// refused at its share, each token at its own; another org's member
// still opens one; closing a stream gives its place back.
func TestStreamsFairPerOrg(t *testing.T) {
	t.Parallel()
	lim := auth.Shares{Total: 20, PerOrg: 6, PerIdentity: 2}
	var o open
	var releases []func()
	opened := 0
	var last string
	for tok := range 10 {
		id := auth.Identity{Org: "hog", User: fmt.Sprint("u", tok), Key: fmt.Sprint("tok", tok)}
		for {
			release, full := o.acquire(lim, id)
			if full != "" {
				last = full
				break
			}
			releases = append(releases, release)
			opened++
		}
	}
	if opened != lim.PerOrg || last != "the organisation's limit of 6 open event streams" {
		t.Fatalf("one org opened %d streams, refused with %q; want %d, refused by the org's limit", opened, last, lim.PerOrg)
	}
	if _, full := o.acquire(lim, auth.Identity{Org: "hog", Key: "tok0"}); full != "the token's limit of 2 open event streams" {
		t.Fatalf("a token at its bound: %q", full)
	}
	release, full := o.acquire(lim, auth.Identity{Org: "other", User: "ann", Key: "ann"})
	if full != "" {
		t.Fatalf("another org's member after the hog: %q", full)
	}
	release()
	releases[0]()
	if _, full := o.acquire(lim, auth.Identity{Org: "hog", Key: "tok9"}); full != "" {
		t.Fatalf("the org after one of its streams closed: %q", full)
	}
	// The server's bound, whatever the orgs.
	for i := range lim.Total - lim.PerOrg {
		if _, full := o.acquire(lim, auth.Identity{Org: fmt.Sprint("o", i/3), Key: fmt.Sprint("k", i)}); full != "" {
			t.Fatalf("stream %d: %q", i, full)
		}
	}
	if _, full := o.acquire(lim, auth.Identity{Org: "late", Key: "late"}); !strings.HasPrefix(full, "the server's limit of 20 ") {
		t.Fatalf("over the server's bound: %q", full)
	}
}

// TestStreamsCountedExactly: under -race, concurrent opens of one org
// get exactly its share, and every close is counted back.
func TestStreamsCountedExactly(t *testing.T) {
	t.Parallel()
	lim := auth.Shares{Total: 1000, PerOrg: 25, PerIdentity: 100}
	var o open
	var mu sync.Mutex
	var releases []func()
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			if release, full := o.acquire(lim, auth.Identity{Org: "o", Key: fmt.Sprint("k", i%7)}); full == "" {
				mu.Lock()
				releases = append(releases, release)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(releases) != 25 {
		t.Fatalf("%d opened, want the org's 25", len(releases))
	}
	for _, r := range releases {
		wg.Go(r)
	}
	wg.Wait()
	if n := o.held.Len(); n != 0 {
		t.Fatalf("after every close: %d streams counted", n)
	}
}
