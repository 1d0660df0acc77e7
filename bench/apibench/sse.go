package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server"
)

// sseResult is one run of the SSE phase.
type sseResult struct {
	db  string
	via string
	run int
	// lat holds every (queued event, client) delivery latency, sorted.
	lat []time.Duration
	// fromCall is the same measured from the start of the Enqueue call:
	// the commit lies between the two.
	fromCall []time.Duration
	// missing counts (queued event, client) pairs never delivered;
	// early counts deliveries parsed before Enqueue had returned (kept
	// in lat as 0).
	missing, early int
	// other counts the other events the clients parsed (running,
	// succeeded ... from the workers).
	other int
	// ended counts streams the server ended before the run did (the
	// client then reconnects with Last-Event-ID).
	ended int
	codes *counter
	// enq holds the Enqueue call durations, sorted.
	enq    []time.Duration
	warns  int
	firstW []string
}

func (r sseResult) line() string {
	return fmt.Sprintf("%d deliveries, p50 %v p99 %v max %v (from the call: p50 %v p99 %v); missing %d, before Enqueue returned %d, other events %d, streams ended early (reconnected) %d, bad answers: %s; enqueue p50 %v p99 %v; warnings %d %q",
		len(r.lat), pct(r.lat, 50).Round(10*time.Microsecond), pct(r.lat, 99).Round(10*time.Microsecond), pct(r.lat, 100).Round(10*time.Microsecond),
		pct(r.fromCall, 50).Round(10*time.Microsecond), pct(r.fromCall, 99).Round(10*time.Microsecond),
		r.missing, r.early, r.other, r.ended, r.codes.String(),
		pct(r.enq, 50).Round(10*time.Microsecond), pct(r.enq, 99).Round(10*time.Microsecond), r.warns, r.firstW)
}

type delivery struct {
	job string
	at  time.Time
}

// runSSE starts a fresh service with o.sseClients connected to GET
// /v1/events, enqueues o.sseN prompts one per o.sseInterval through the
// server's store handle (via "same") or a second handle ("other"), and
// times each client's parse of each job's queued event.
func runSSE(ctx context.Context, d db, eng *promptkit.Engine, o opts, via string) sseResult {
	e := start(ctx, d, eng, o.workers)
	defer e.stop()
	enqStore := e.st
	if via == "other" {
		st, err := e.reopen()
		must(err)
		defer st.Close()
		enqStore = st
	}
	hc, tr := clientFor(o.sseClients)
	defer tr.CloseIdleConnections()
	res := sseResult{db: d.name, via: via, codes: &counter{}}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ready, done, ended sync.WaitGroup
	clients := make([]*sseClient, o.sseClients)
	for i := range clients {
		c := &sseClient{url: e.srv.URL() + "/v1/events", hc: hc, want: o.sseN, codes: res.codes,
			got: make([]delivery, 0, o.sseN)}
		clients[i] = c
		ready.Add(1)
		done.Add(1)
		c.ready, c.done = sync.OnceFunc(ready.Done), sync.OnceFunc(done.Done)
		ended.Go(func() { c.run(cctx) })
	}
	ready.Wait()

	enqAt := make(map[string]time.Time, o.sseN)
	callAt := make(map[string]time.Time, o.sseN)
	t0 := time.Now()
	for k := range o.sseN {
		if w := time.Until(t0.Add(time.Duration(k) * o.sseInterval)); w > 0 {
			time.Sleep(w)
		}
		t := time.Now()
		r, err := enqStore.Enqueue(ctx, jobs.EnqueueParams{
			OrgID: server.LocalOrg, CreatedBy: server.LocalUser, Text: "apibench event " + strconv.Itoa(k),
		})
		now := time.Now()
		must(err)
		enqAt[r.JobID], callAt[r.JobID] = now, t
		res.enq = append(res.enq, now.Sub(t))
	}
	// Every client has everything, or 10 s have passed.
	all := make(chan struct{})
	go func() { done.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
	}
	cancel()
	ended.Wait()

	for _, c := range clients {
		for _, g := range c.got {
			at, ok := enqAt[g.job]
			if !ok {
				continue
			}
			d := g.at.Sub(at)
			if d < 0 {
				res.early++
				d = 0
			}
			res.lat = append(res.lat, d)
			res.fromCall = append(res.fromCall, g.at.Sub(callAt[g.job]))
		}
		res.missing += o.sseN - len(c.got)
		res.other += c.others
		res.ended += c.reconnects
	}
	slices.Sort(res.lat)
	slices.Sort(res.fromCall)
	slices.Sort(res.enq)
	res.warns, res.firstW = e.log.summary()
	return res
}

func reportSSE(o opts, dbs []db, rs []sseResult) {
	fmt.Printf("### GET /v1/events delivery\n\n")
	fmt.Printf("%d clients; %d prompts enqueued one per %v; latency from Enqueue's return to each client's parse of the queued event. ms, min / median / max over %d runs.\n\n",
		o.sseClients, o.sseN, o.sseInterval, o.runs)
	fmt.Println("| database | enqueued through | deliveries/run | p50 | p99 | max | p99 from the call | missing | streams dropped | enqueue p50 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, d := range dbs {
		for _, v := range o.sseVia {
			var p50, p99, mx, p99c, enq []float64
			n, missing, ended := 0, 0, 0
			for _, r := range rs {
				if r.db != d.name || r.via != v {
					continue
				}
				p50 = append(p50, msd(pct(r.lat, 50)))
				p99 = append(p99, msd(pct(r.lat, 99)))
				mx = append(mx, msd(pct(r.lat, 100)))
				p99c = append(p99c, msd(pct(r.fromCall, 99)))
				enq = append(enq, msd(pct(r.enq, 50)))
				n = max(n, len(r.lat))
				missing += r.missing
				ended += r.ended
			}
			if len(p50) == 0 {
				continue
			}
			name := map[string]string{"same": "server's handle", "other": "second handle"}[v]
			fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %d | %d | %s |\n", d.name, name, n,
				spread(p50, ms), spread(p99, ms), spread(mx, ms), spread(p99c, ms), missing, ended, ms(median(enq)))
		}
	}
	fmt.Println()
}

// sseClient is one GET /v1/events client. It records when it parsed each
// job's queued event and, when the server ends its stream (a subscriber
// that fell behind is dropped), reconnects with Last-Event-ID, as a
// client should.
type sseClient struct {
	url   string
	hc    *http.Client
	want  int
	codes *counter
	// ready is called once subscribed, done once want queued events
	// arrived; both also when the client gives up.
	ready, done func()

	got        []delivery
	others     int
	reconnects int
	lastID     string
}

func (c *sseClient) run(ctx context.Context) {
	defer c.ready()
	defer c.done()
	for {
		c.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		c.reconnects++
		if c.reconnects > 100 {
			c.codes.add("gave up after 100 reconnects")
			return
		}
	}
}

// stream reads one connection until it ends.
func (c *sseClient) stream(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	must(err)
	if c.lastID != "" {
		req.Header.Set("Last-Event-ID", c.lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.codes.add("error: " + err.Error())
			time.Sleep(10 * time.Millisecond)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.codes.add(strconv.Itoa(resp.StatusCode))
		time.Sleep(10 * time.Millisecond)
		return
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, id string
	var data []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if event == "job.state_changed" {
				var ev struct {
					JobID string     `json:"job_id"`
					State jobs.State `json:"state"`
				}
				if json.Unmarshal(data, &ev) == nil && ev.State == jobs.Queued {
					c.got = append(c.got, delivery{ev.JobID, time.Now()})
					if len(c.got) == c.want {
						c.done()
					}
				} else {
					c.others++
				}
				if id != "" {
					c.lastID = id
				}
			}
			event, id, data = "", "", data[:0]
		case line[0] == ':':
			// The stream's opening comment: subscribed.
			c.ready()
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[len("id: "):])
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[len("data: "):]...)
		}
	}
}
