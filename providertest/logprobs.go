package providertest

import (
	"encoding/json"
	"strconv"
)

// MaxTopLogprobs is the largest "top_logprobs" the fake takes, as OpenAI.
const MaxTopLogprobs = 20

// Wire types of a choice's "logprobs", shaped like OpenAI's.
type (
	wireLogprobs struct {
		Content []logprobEntry `json:"content"`
	}
	logprobEntry struct {
		Token       string       `json:"token"`
		Logprob     float64      `json:"logprob"`
		Bytes       []int        `json:"bytes"` // not []byte, which encodes as base64
		TopLogprobs []topLogprob `json:"top_logprobs"`
	}
	topLogprob struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
)

// choiceShape is how the choices of one answer render "logprobs": with
// logprobs, an object per choice (null on stream chunks without content);
// else null when extended (the answer uses a feature newer than the
// original shape: logprobs, several choices or reasoning), as OpenAI and
// vLLM send it; else no key at all, so that answers to requests using
// none of those features stay as they were.
type choiceShape struct {
	logprobs bool
	top      int // top_logprobs entries per token
	extended bool
}

// none is the "logprobs" of a choice that carries none: null or absent.
func (sh choiceShape) none() json.RawMessage {
	if sh.extended {
		return json.RawMessage("null")
	}
	return nil
}

// logprobEntry is the entry of the k-th token of a choice's content:
// deterministic log probabilities from -0.1 down to -1.0, repeating every
// ten tokens; its top_logprobs list the token itself and then
// alternatives "alt1", "alt2", ... each one less likely by 1.
func (sh choiceShape) entry(k int, token string) logprobEntry {
	tenths := k%10 + 1
	e := logprobEntry{
		Token:       token,
		Logprob:     -float64(tenths) / 10, // exact tenths print as -0.3, not -0.30000000000000004
		Bytes:       byteValues(token),
		TopLogprobs: []topLogprob{},
	}
	for j := range sh.top {
		alt := topLogprob{Token: token, Logprob: e.Logprob, Bytes: e.Bytes}
		if j > 0 {
			alt.Token = "alt" + strconv.Itoa(j)
			alt.Logprob = -float64(tenths+10*j) / 10
			alt.Bytes = byteValues(alt.Token)
		}
		e.TopLogprobs = append(e.TopLogprobs, alt)
	}
	return e
}

// content renders the "logprobs" of a whole choice whose content is
// text: one entry per word piece (splitWords), so the tokens join back to
// the content as OpenAI's do.
func (sh choiceShape) content(text string) json.RawMessage {
	if !sh.logprobs {
		return sh.none()
	}
	lp := wireLogprobs{Content: []logprobEntry{}}
	for k, piece := range splitWords(text) {
		lp.Content = append(lp.Content, sh.entry(k, piece))
	}
	b, _ := json.Marshal(lp) // strings, ints and finite floats
	return b
}

// piece renders the "logprobs" of a stream chunk carrying the k-th piece
// of a choice's content.
func (sh choiceShape) piece(k int, token string) json.RawMessage {
	if !sh.logprobs {
		return sh.none()
	}
	b, _ := json.Marshal(wireLogprobs{Content: []logprobEntry{sh.entry(k, token)}})
	return b
}

func byteValues(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}
