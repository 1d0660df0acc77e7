package openai

import (
	"net/http"
	"sync"
)

// DefaultIdleConns is how many idle connections the built-in client keeps
// per backend host when Endpoint.MaxIdleConns is 0.
const DefaultIdleConns = 100

// pools holds one client per idle-pool size. Clients are shared for the
// life of the process, as net/http's default client is, because an engine
// has no Close to release its connections; pools are per host inside a
// transport, so backends of the same size do not share connections.
var pools = struct {
	sync.Mutex
	clients map[int]*http.Client
}{clients: map[int]*http.Client{}}

// pooledClient returns the shared client keeping up to idle (0:
// DefaultIdleConns) idle connections per host.
func pooledClient(idle int) *http.Client {
	if idle <= 0 {
		idle = DefaultIdleConns
	}
	pools.Lock()
	defer pools.Unlock()
	c, ok := pools.clients[idle]
	if !ok {
		c = &http.Client{Transport: NewTransport(idle)}
		pools.clients[idle] = c
	}
	return c
}

// NewTransport returns a transport like http.DefaultTransport (proxy from
// the environment, the same timeouts, HTTP/2 when offered) that keeps up
// to idlePerHost idle connections per host, without a limit across hosts.
// The default of 2 per host makes a backend serving many concurrent calls
// close most connections after one response and open new ones (a new TCP
// and TLS handshake per call); a pool as large as the calls in flight lets
// every call reuse one.
func NewTransport(idlePerHost int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = idlePerHost
	return t
}
