package openai

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promptkit/promptkit/providertest"
)

func idlePerHost(t *testing.T, c *http.Client) int {
	t.Helper()
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", c.Transport)
	}
	if tr.MaxIdleConns != 0 {
		t.Errorf("MaxIdleConns = %d, want 0 (no limit across hosts)", tr.MaxIdleConns)
	}
	return tr.MaxIdleConnsPerHost
}

func TestDefaultClientPoolSize(t *testing.T) {
	for _, tt := range []struct{ maxIdle, want int }{{0, DefaultIdleConns}, {-1, DefaultIdleConns}, {1, 1}, {64, 64}} {
		f := mustPrepare(t, Endpoint{BaseURL: "http://127.0.0.1:1/v1", MaxIdleConns: tt.maxIdle}, basicRequest())
		if got := idlePerHost(t, f.client); got != tt.want {
			t.Errorf("MaxIdleConns %d: pool of %d per host, want %d", tt.maxIdle, got, tt.want)
		}
	}
	// Backends of one size share a client, so its connections are reused
	// across Prepare calls.
	a := mustPrepare(t, Endpoint{BaseURL: "http://127.0.0.1:1/v1", MaxIdleConns: 64}, basicRequest())
	b := mustPrepare(t, Endpoint{BaseURL: "http://127.0.0.1:2/v1", MaxIdleConns: 64}, basicRequest())
	if a.client != b.client {
		t.Error("two Prepare calls of one size got different clients")
	}
	own := &http.Client{}
	if f := mustPrepare(t, Endpoint{BaseURL: "http://127.0.0.1:1/v1", MaxIdleConns: 64, HTTPClient: own}, basicRequest()); f.client != own {
		t.Error("a configured HTTPClient was replaced")
	}
}

// BenchmarkConcurrentCalls runs 64 calls at a time against a provider
// answering after 2ms, on Go's default transport (2 idle connections per
// host) and on one whose pool holds 64, reporting connections opened per
// call and calls per second.
func BenchmarkConcurrentCalls(b *testing.B) {
	const inFlight = 64
	srv := providertest.NewServer(providertest.WithLatency(2 * time.Millisecond))
	defer srv.Close()
	for _, bc := range []struct {
		name      string
		transport func() *http.Transport
	}{
		{"default-transport", func() *http.Transport { return http.DefaultTransport.(*http.Transport).Clone() }},
		{"pool-64", func() *http.Transport { return NewTransport(inFlight) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := bc.transport()
			defer tr.CloseIdleConnections()
			f, err := Prepare(Endpoint{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: tr}}, basicRequest())
			if err != nil {
				b.Fatal(err)
			}
			var next, opened atomic.Int64
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) {
					if !info.Reused {
						opened.Add(1)
					}
				},
			})
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range inFlight {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if out := f.Execute(ctx); out.Err != nil {
							b.Error(out.Err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.ReportMetric(float64(opened.Load())/float64(b.N), "newconns/op")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
		})
	}
}
