package providertest

import (
	"net/http"
	"net/http/httptest"
)

// Server is a Handler listening on a loopback address. Its Handler methods
// (Enqueue, Requests, WaitArrivals, ...) are promoted.
type Server struct {
	// URL is the base URL to configure as the backend, of the form
	// http://127.0.0.1:port/v1.
	URL string
	// Handler is the fake serving the requests.
	*Handler

	srv *httptest.Server
}

// NewServer starts a Server whose Handler is configured by opts. Call Close
// when done.
func NewServer(opts ...Option) *Server {
	h := NewHandler(opts...)
	srv := httptest.NewServer(h)
	return &Server{URL: srv.URL + "/v1", Handler: h, srv: srv}
}

// Client returns an HTTP client configured for the Server.
func (s *Server) Client() *http.Client {
	return s.srv.Client()
}

// Close shuts the Server down. Requests still waiting on a delay or a Hold
// are released with a 503 first, so Close does not block on them.
func (s *Server) Close() {
	s.Handler.shutdown()
	s.srv.Close()
}
