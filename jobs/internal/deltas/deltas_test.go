package deltas

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/promptkit/promptkit/internal/testkit"
	"github.com/promptkit/promptkit/pktype"
)

func drain(ch <-chan pktype.StreamDelta) []int {
	var got []int
	for {
		select {
		case d := <-ch:
			got = append(got, d.Index)
		default:
			return got
		}
	}
}

// A reader that subscribes after a job's first pieces were delivered gets
// them (its request subscribed once the job was stored, and a worker had
// started it), then what comes; only the first RecentPieces are kept, and
// only for RecentFor.
func TestLateReaderGetsTheFirstPieces(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	h := &Hub{Now: clock.Now}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range RecentPieces + 10 {
		h.Deliver("job-1", pktype.StreamDelta{Generation: 1, Attempt: 1, Index: i})
	}
	late := h.Subscribe(ctx, "job-1")
	got := drain(late)
	if len(got) != RecentPieces || got[0] != 0 || got[RecentPieces-1] != RecentPieces-1 {
		t.Fatalf("a late reader got %v, want the first %d", got, RecentPieces)
	}
	h.Deliver("job-1", pktype.StreamDelta{Index: 99})
	if got := drain(late); len(got) != 1 || got[0] != 99 {
		t.Errorf("then %v, want [99]", got)
	}
	if got := drain(h.Subscribe(ctx, "job-2")); len(got) != 0 {
		t.Errorf("another job's reader got %v", got)
	}

	clock.Advance(RecentFor)
	if got := drain(h.Subscribe(ctx, "job-1")); len(got) != 0 {
		t.Errorf("after RecentFor a reader got %v", got)
	}
	h.Deliver("job-3", pktype.StreamDelta{Index: 0})
	if len(h.recent) != 1 || len(h.since) != 1 {
		t.Errorf("kept %d jobs (%d listed), want only job-3's", len(h.recent), len(h.since))
	}
}

// A subscription ends with its context, and delivering never blocks on a
// reader that does not read.
func TestSubscriptionEnds(t *testing.T) {
	var h Hub
	ctx, cancel := context.WithCancel(context.Background())
	ch := h.Subscribe(ctx, "job")
	for i := range Buffer + 10 {
		h.Deliver("job", pktype.StreamDelta{Index: i})
	}
	cancel()
	n := 0
	for range ch {
		n++
	}
	if n != Buffer {
		t.Errorf("read %d pieces before the close, want the %d buffered", n, Buffer)
	}
}

// A piece whose backend chunk would not fit a notification goes without
// it, its text kept; one too large even so is refused.
func TestPayloadDropsAChunkTooLarge(t *testing.T) {
	big := json.RawMessage(`{"choices":[{"index":0,"delta":{"content":"hi"},"logprobs":{"content":["` + strings.Repeat("x", MaxPayload) + `"]}}]}`)
	p, err := Payload("s", "o", "j", pktype.StreamDelta{Index: 3, Text: "hi", Raw: big})
	if err != nil {
		t.Fatal(err)
	}
	jobID, d, ok := Parse(p, "s", "other")
	if !ok || jobID != "j" || d.Text != "hi" || d.Index != 3 || d.Raw != nil {
		t.Errorf("parsed %q %+v %v", jobID, d, ok)
	}
	small := json.RawMessage(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`)
	if p, _ := Payload("s", "o", "j", pktype.StreamDelta{Text: "hi", Raw: small}); !strings.Contains(p, `"raw"`) {
		t.Errorf("a chunk that fits was dropped: %s", p)
	}
	if _, err := Payload("s", "o", "j", pktype.StreamDelta{Text: strings.Repeat("x", MaxPayload)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a piece too large: %v", err)
	}
}
