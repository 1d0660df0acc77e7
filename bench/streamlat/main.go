// Command streamlat measures how late a streamed chat completion's pieces
// reach the client: a backend streams -chunks pieces -gap apart, and for
// each of -n requests the client's arrival of the first and the last
// piece is compared with the backend's sending of them (one process, one
// clock). promptkit runs as child processes of the binary built from the
// tree the bench module replaces. Two setups: SQLite, with `promptkit
// serve` running the job in its own worker; and PostgreSQL, with `serve
// --workers 0` and the job run by a separate `promptkit worker` process,
// so the pieces cross processes through the database.
//
//	cd bench && go run ./streamlat -n 100
//
// The PostgreSQL row needs PROMPTKIT_TEST_DATABASE_URL (a fresh schema,
// dropped afterwards). Everything runs on loopback and stops by itself.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promptkit/promptkit/bench/internal/pkbin"
)

func main() {
	n := flag.Int("n", 100, "requests per setup")
	chunks := flag.Int("chunks", 20, "pieces the backend streams per answer")
	gap := flag.Duration("gap", 100*time.Millisecond, "time between the backend's pieces")
	conc := flag.Int("concurrency", 10, "requests in flight")
	flag.Parse()
	ctx := context.Background()

	be := newBackend(*chunks, *gap)
	defer be.srv.Close()
	fmt.Printf("streamlat: %s, %d cores, go %s; %d requests per setup, %d at a time; backend: %d pieces %v apart\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), *n, *conc, *chunks, *gap)
	fmt.Println("| setup | first piece late by (p50 / p99 / max) | last piece late by | whole answer ([DONE]) after the backend's last piece | requests |")
	fmt.Println("|---|---|---|---|---|")

	dir, err := os.MkdirTemp("", "streamlat-")
	must(err)
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "promptkit.yaml")
	must(os.WriteFile(cfg, []byte(fmt.Sprintf("transient_retries: 0\nbackends:\n  - {id: b, base_url: %s/v1}\nprofiles:\n  - {id: default, backend: b, model: m}\n", be.srv.URL)), 0o600))

	bin, cleanup, err := pkbin.Build()
	must(err)
	defer cleanup()

	{
		base, stop := serve(bin, filepath.Join(dir, "serve.log"), []string{"--database", filepath.Join(dir, "jobs.db"), "--config", cfg})
		report("SQLite, job run by serve's worker", be, base, *n, *conc)
		stop()
	}

	pg := os.Getenv("PROMPTKIT_TEST_DATABASE_URL")
	if pg == "" {
		fmt.Println("| PostgreSQL | skipped: PROMPTKIT_TEST_DATABASE_URL is unset | | | |")
		return
	}
	dsn, drop := schema(ctx, pg)
	defer drop()
	base, stop := serve(bin, filepath.Join(dir, "serve-pg.log"), []string{"--database", dsn, "--config", cfg, "--workers", "0"})
	wctx, cancel := context.WithCancel(ctx)
	w := exec.CommandContext(wctx, bin, "worker", "--database", dsn, "--config", cfg, "--workers", "16")
	w.Cancel = func() error { return w.Process.Signal(os.Interrupt) }
	var wlog bytes.Buffer
	w.Stderr = &wlog
	must(w.Start())
	report("PostgreSQL, job run by another process", be, base, *n, *conc)
	cancel()
	_ = w.Wait()
	stop()
}

// backend streams an answer of `chunks` pieces, `gap` apart, and records
// when it sent each request's first and last piece, by the request's
// marker (its last message).
type backend struct {
	srv         *httptest.Server
	chunks      int
	gap         time.Duration
	mu          sync.Mutex
	first, last map[string]time.Time
}

func newBackend(chunks int, gap time.Duration) *backend {
	b := &backend{chunks: chunks, gap: gap, first: map[string]time.Time{}, last: map[string]time.Time{}}
	b.srv = httptest.NewServer(b)
	return b
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	marker := req.Messages[len(req.Messages)-1].Content
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(data string) {
		fmt.Fprintf(w, "data: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
	const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	send(head + `{"role":"assistant","content":""},"finish_reason":null}]}`)
	t := time.NewTimer(0)
	defer t.Stop()
	for i := range b.chunks {
		if i > 0 {
			t.Reset(b.gap)
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		send(head + fmt.Sprintf(`{"content":"w%d "},"finish_reason":null}]}`, i))
		now := time.Now()
		b.mu.Lock()
		if i == 0 {
			b.first[marker] = now
		}
		b.last[marker] = now
		b.mu.Unlock()
	}
	send(head + `{},"finish_reason":"stop"}],"usage":null}`)
	send(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":20,"total_tokens":21}}`)
	send("[DONE]")
}

// report runs n streamed requests against the front door at base and
// prints how late their first and last pieces arrived.
func report(name string, b *backend, base string, n, conc int) {
	var mu sync.Mutex
	var firsts, lasts, dones []time.Duration
	failed := 0
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	run := hex.EncodeToString(randBytes(4))
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			marker := fmt.Sprintf("req-%s-%d", run, i)
			first, last, done, err := stream(base, marker)
			b.mu.Lock()
			bf, bl := b.first[marker], b.last[marker]
			b.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			if err != nil || bf.IsZero() || first.IsZero() || done.IsZero() {
				failed++
				if failed == 1 {
					fmt.Fprintln(os.Stderr, "streamlat:", name, err)
				}
				return
			}
			firsts = append(firsts, first.Sub(bf))
			lasts = append(lasts, last.Sub(bl))
			dones = append(dones, done.Sub(bl))
		})
	}
	wg.Wait()
	fmt.Printf("| %s | %s | %s | %s | %d (%d failed) |\n", name, summary(firsts), summary(lasts), summary(dones), n, failed)
}

// stream makes one streamed chat completion and returns when its first
// and its last content piece arrived, and its end (data: [DONE]).
func stream(base, marker string) (first, last, done time.Time, err error) {
	body := fmt.Sprintf(`{"model":"default","stream":true,"messages":[{"role":"user","content":%q}]}`, marker)
	res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return first, last, done, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return first, last, done, fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = time.Now()
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return first, last, done, err
		}
		if c.Error != nil {
			return first, last, done, fmt.Errorf("error event: %s", c.Error)
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			last = now
		}
	}
	return first, last, done, sc.Err()
}

func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("%s / %s / %s ms", ms(q(0.5)), ms(q(0.99)), ms(ds[len(ds)-1]))
}

// serve runs `bin serve` with args, its output going to the file log;
// stop ends it.
func serve(bin, log string, args []string) (base string, stop func()) {
	s, err := pkbin.StartServe(bin, log, time.Minute, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "streamlat: %v\n", err)
		os.Exit(1)
	}
	return s.URL, func() { s.Stop(time.Minute) }
}

// schema creates a fresh schema on the database at base and returns its
// URL and what drops it.
func schema(ctx context.Context, base string) (string, func()) {
	name := "streamlat_" + hex.EncodeToString(randBytes(4))
	conn, err := pgx.Connect(ctx, base)
	must(err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	must(err)
	u, err := url.Parse(base)
	must(err)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			c.Close(ctx)
		}
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "streamlat:", err)
		os.Exit(1)
	}
}
