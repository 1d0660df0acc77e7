package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/promptkit/promptkit/internal/llm"
	"github.com/promptkit/promptkit/pktype"
)

// FuzzDecodeStream checks that the event-stream decoder never panics,
// that its pieces are numbered from 0 and join to the answer, that usage
// keeps unknown apart from zero, and that it never reports success for
// a stream without [DONE].
func FuzzDecodeStream(f *testing.F) {
	for _, s := range []string{
		sse(chunkRole, chunkText("Hello"), chunkText(" world"), chunkStop, chunkUsage),
		sse(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}`),
		strings.TrimSuffix(sse(chunkText("a")), "data: [DONE]\n\n"),
		sse(chunkText("a"), `{"error":{"message":"boom","code":429}}`),
		": ping\r\nevent: x\r\ndata: {\"choices\":[{\"delta\":\r\ndata: {\"content\":\"a\"}}]}\r\n\r\ndata: [DONE]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		const limit = 1 << 16
		var pieces []pktype.StreamDelta
		resp, usage, presence, err := decodeStream(bytes.NewReader(body), limit, func(d pktype.StreamDelta) {
			if d.Index != len(pieces) {
				t.Fatalf("piece %d has index %d", len(pieces), d.Index)
			}
			if len(d.Raw) == 0 || !json.Valid(d.Raw) {
				t.Fatalf("piece %d has no chunk, or one that is not JSON", d.Index)
			}
			pieces = append(pieces, d)
		})
		checkUsage(t, usage, presence)
		// However the bytes arrive, the answer is the same.
		r1, _, _, err1 := decodeStream(iotest.OneByteReader(bytes.NewReader(body)), limit, nil)
		if (err1 == nil) != (err == nil) || !reflect.DeepEqual(r1, resp) {
			t.Fatalf("read a byte at a time: %+v, %v; at once: %+v, %v", r1, err1, resp, err)
		}
		if err != nil {
			if resp != nil {
				t.Fatalf("resp %+v with err %v", resp, err)
			}
			var ev *errorEvent
			var ae *llm.AttemptError
			switch {
			case errors.As(err, &ev):
				if ev.status < 400 || ev.status > 599 {
					t.Fatalf("error event status %d", ev.status)
				}
				_ = ev.detail("key")
			case errors.As(err, &ae):
				if !errors.Is(err, pktype.ErrMalformedResponse) {
					t.Fatalf("err %v is not malformed", err)
				}
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if resp == nil {
			t.Fatal("nil response without error")
		}
		done := bytes.Index(body, []byte(doneData))
		if done < 0 {
			t.Fatal("success without [DONE]")
		}
		// Cut before the first [DONE], the same stream must fail.
		if r, _, _, err := decodeStream(bytes.NewReader(body[:done]), limit, nil); err == nil {
			t.Fatalf("success without [DONE]: %+v", r)
		}
		if resp.Usage != usage || resp.Presence() != presence {
			t.Fatalf("response usage %+v differs from %+v", resp.Usage, usage)
		}
		// Each choice's pieces join to that choice of the answer.
		type joined struct {
			text, reasoning string
			args            map[int]string
		}
		byChoice := map[int]*joined{}
		for _, p := range pieces {
			j := byChoice[p.Choice]
			if j == nil {
				j = &joined{args: map[int]string{}}
				byChoice[p.Choice] = j
			}
			j.text += p.Text
			j.reasoning += p.Reasoning
			for _, c := range p.ToolCalls {
				j.args[c.Index] += c.Arguments
			}
		}
		if !json.Valid(resp.Raw) {
			t.Fatalf("answer object is not JSON: %s", resp.Raw)
		}
		for _, c := range resp.AllChoices() {
			j := byChoice[c.Index]
			if j == nil {
				j = &joined{args: map[int]string{}}
			}
			if j.text != c.Text || j.reasoning != c.Reasoning {
				t.Fatalf("choice %d: pieces join to %q and %q, answer is %q and %q", c.Index, j.text, j.reasoning, c.Text, c.Reasoning)
			}
			if len(j.args) != len(c.ToolCalls) {
				t.Fatalf("choice %d: pieces name %d calls, answer has %d", c.Index, len(j.args), len(c.ToolCalls))
			}
			for _, call := range c.ToolCalls {
				if call.ID == "" || call.Function.Name == "" || call.Type == "" {
					t.Fatalf("incomplete call %+v", call)
				}
			}
		}
	})
}
