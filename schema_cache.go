package promptkit

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// compiled holds the schemas compiled last, by URL and content.
var compiled schemaCache

// maxCachedSchemas and maxCachedBytes bound the cache, in schemas and in
// their summed length: compiled, a schema holds about 30 times its
// length (2 MB at the limits, tens of kilobytes for a realistic one),
// so the cache holds at most about 30 MB.
const (
	maxCachedSchemas = 64
	maxCachedBytes   = 1 << 20
)

// schemaCache is a least-recently-used cache of compiled schemas. A
// compiled schema is only read once made, so it can be shared.
type schemaCache struct {
	mu    sync.Mutex
	byKey map[[sha256.Size]byte]*list.Element
	order list.List // of *schemaEntry, most recently used first
	bytes int       // the summed size of the entries
}

type schemaEntry struct {
	key    [sha256.Size]byte
	schema *compiledSchema
	size   int // the schema's length
}

// schemaKey identifies a schema compiled under url: the url goes into
// where the compiler says things are, so it is part of the key. The
// schema is keyed in the form json.Marshal gives it (compact, HTML
// escaped): a request's schema is checked at submission as its client
// spaced it, and run as the store keeps it, re-encoded.
func schemaKey(url string, raw json.RawMessage) [sha256.Size]byte {
	var compact, escaped bytes.Buffer
	if json.Compact(&compact, raw) == nil {
		json.HTMLEscape(&escaped, compact.Bytes())
		raw = escaped.Bytes()
	}
	h := sha256.New()
	h.Write([]byte(url))
	h.Write([]byte{0})
	h.Write(raw)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func (c *schemaCache) get(key [sha256.Size]byte) *compiledSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*schemaEntry).schema
}

// put adds s, compiled from size bytes, evicting the least recently used
// entries beyond the bounds.
func (c *schemaCache) put(key [sha256.Size]byte, s *compiledSchema, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[[sha256.Size]byte]*list.Element{}
	}
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e) // compiled twice at once: keep the first
		return
	}
	c.byKey[key] = c.order.PushFront(&schemaEntry{key, s, size})
	c.bytes += size
	for c.order.Len() > maxCachedSchemas || c.bytes > maxCachedBytes {
		last := c.order.Remove(c.order.Back()).(*schemaEntry)
		delete(c.byKey, last.key)
		c.bytes -= last.size
	}
}
