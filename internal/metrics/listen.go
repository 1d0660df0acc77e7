package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Listener serves GET /metrics, open, on an address of its own: the
// `worker` command's --metrics-addr (serve has the server's).
type Listener struct {
	ln   net.Listener
	http *http.Server
	done chan struct{}
	err  error // Serve's, once done is closed
}

// listenerShutdown bounds how long Close lets a scrape in flight finish.
const listenerShutdown = 5 * time.Second

// Listen binds addr and serves m's metrics at /metrics until Close.
func (m *Metrics) Listen(addr string, log *slog.Logger) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	l := &Listener{ln: ln, done: make(chan struct{}), http: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}
	go func() { // ends when Close shuts the server down
		defer close(l.done)
		if err := l.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			l.err = err
		}
	}()
	return l, nil
}

// URL is the listener's base URL, e.g. "http://127.0.0.1:9090".
func (l *Listener) URL() string { return "http://" + l.ln.Addr().String() }

// Close stops the listener, letting a scrape in flight finish (up to 5
// seconds).
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), listenerShutdown)
	defer cancel()
	err := l.http.Shutdown(ctx)
	<-l.done
	return errors.Join(err, l.err)
}
