package promptkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestSchemaCache: a schema compiled again under the same URL is the one
// compiled before (a request's schema is compiled at submission and when
// it runs), however it is spaced; another URL or another schema is
// compiled anew; the cache keeps the last maxCachedSchemas, and no more
// than maxCachedBytes of them. Not parallel: other tests' compiles
// would share the cache.
func TestSchemaCache(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"cache_test":{"type":"string"}}}`)
	compile := func(url string, raw json.RawMessage) *compiledSchema {
		t.Helper()
		s, err := compileSchema(url, raw)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := compile("promptkit:///cache-test/a.json", raw)
	if compile("promptkit:///cache-test/a.json", raw) != first {
		t.Error("the same schema was compiled twice")
	}
	// As a store keeps it: re-encoded, compact and HTML escaped.
	spaced := json.RawMessage(`{ "type": "object", "properties": { "cache_test": { "type": "string", "pattern": "^<a>$" } } }`)
	stored, err := json.Marshal(spaced)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(stored, spaced) || compile("promptkit:///cache-test/a.json", spaced) != compile("promptkit:///cache-test/a.json", stored) {
		t.Error("a schema re-encoded was compiled again")
	}
	if compile("promptkit:///cache-test/b.json", raw) == first {
		t.Error("a schema under another URL is the first one")
	}
	if compile("promptkit:///cache-test/a.json", json.RawMessage(`{"type":"object"}`)) == first {
		t.Error("another schema is the first one")
	}
	for i := range maxCachedSchemas {
		compile(fmt.Sprintf("promptkit:///cache-test/other%d.json", i), raw)
	}
	if compile("promptkit:///cache-test/a.json", raw) == first {
		t.Error("the cache kept more than maxCachedSchemas")
	}
	// Few large schemas fill it by their length.
	large := json.RawMessage(`{"description":"` + strings.Repeat("x", 120_000) + `"}`)
	first = compile("promptkit:///cache-test/large0.json", large)
	for i := range maxCachedBytes / len(large) {
		compile(fmt.Sprintf("promptkit:///cache-test/large%d.json", i+1), large)
	}
	if compile("promptkit:///cache-test/large0.json", large) == first {
		t.Error("the cache kept more than maxCachedBytes")
	}
}

// TestRegexFormatShared: a draft-07 schema asserts "format": "regex" with
// the compile's regexp engine, which the compiled (and cached, shared)
// schema keeps. Checks from many goroutines at once (run with -race)
// each have a budget of their own: valid patterns pass however many
// came before, invalid and too costly ones fail.
func TestRegexFormatShared(t *testing.T) {
	t.Parallel()
	s, err := compileSchema("promptkit:///regex-format-test.json",
		json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"string","format":"regex"}`))
	if err != nil {
		t.Fatal(err)
	}
	costly := strings.Repeat("[a-z]{999}", 20) // 20,000 instructions
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				for _, c := range []struct {
					value string
					ok    bool
				}{{fmt.Sprintf("^[a-z]{900}%d-%d$", g, i), true}, {"(", false}, {costly, false}} {
					problems, err := s.validateValue(c.value)
					if err != nil || (len(problems) == 0) != c.ok {
						t.Errorf("%.20q: %v %v", c.value, problems, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
