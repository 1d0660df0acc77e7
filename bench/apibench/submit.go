package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promptkit/promptkit"
	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server"
)

// submitResult is one run of the submit phase.
type submitResult struct {
	db      string
	clients int
	think   time.Duration
	auth    string
	run     int
	// lat holds every 202's latency, sorted.
	lat     []time.Duration
	wall    time.Duration
	codes   *counter // non-202 answers and transport errors
	queued  int      // queued jobs when the clients finished
	running int
	done    int // succeeded when the clients finished
	warns   int
	firstW  []string
}

func (r submitResult) line() string {
	return fmt.Sprintf("%d ok in %v (%.0f/s), p50 %v p99 %v max %v; other answers: %s; queued %d running %d succeeded %d; warnings %d %q",
		len(r.lat), r.wall.Round(time.Millisecond), float64(len(r.lat))/r.wall.Seconds(),
		pct(r.lat, 50).Round(10*time.Microsecond), pct(r.lat, 99).Round(10*time.Microsecond), pct(r.lat, 100).Round(10*time.Microsecond),
		r.codes.String(), r.queued, r.running, r.done, r.warns, r.firstW)
}

// runSubmit starts a fresh service and has c clients POST /v1/prompts in
// a closed loop, pausing think after each answer, until o.n requests
// are answered. With auth "token" every request carries an admin bearer
// token (the server then looks it up per request); with "local" none,
// and the server acts as the local identity.
func runSubmit(ctx context.Context, d db, eng *promptkit.Engine, o opts, c int, think time.Duration, auth string) submitResult {
	e := start(ctx, d, eng, o.workers)
	defer e.stop()
	hc, tr := clientFor(c)
	defer tr.CloseIdleConnections()
	hc.Timeout = 30 * time.Second
	base := e.srv.URL()
	bearer := ""
	if auth == "token" {
		secret, hash := jobs.NewTokenSecret()
		_, err := e.st.CreateToken(ctx, jobs.CreateTokenParams{
			OrgID: server.LocalOrg, UserID: server.LocalUser, Role: jobs.RoleAdmin, Hash: hash,
		})
		must(err)
		bearer = "Bearer " + secret
	}

	// Open c connections before timing: every client does one GET
	// /healthz at once, and the pool keeps them all.
	var warm sync.WaitGroup
	for range c {
		warm.Go(func() {
			resp, err := hc.Get(base + "/healthz")
			must(err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	warm.Wait()

	res := submitResult{db: d.name, clients: c, think: think, auth: auth, codes: &counter{}}
	lats := make([][]time.Duration, c)
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range c {
		wg.Go(func() {
			buf := make([]byte, 0, 64)
			if think > 0 {
				// Spread the clients over one think time.
				time.Sleep(time.Duration(i) * think / time.Duration(c))
			}
			for {
				k := next.Add(1) - 1
				if k >= int64(o.n) {
					return
				}
				buf = append(buf[:0], `{"text":"apibench prompt `...)
				buf = strconv.AppendInt(buf, k, 10)
				buf = append(buf, `"}`...)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/prompts", bytes.NewReader(buf))
				must(err)
				req.Header.Set("Content-Type", "application/json")
				if bearer != "" {
					req.Header.Set("Authorization", bearer)
				}
				t := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					res.codes.add("error: " + err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(t)
				if resp.StatusCode != http.StatusAccepted {
					res.codes.add(strconv.Itoa(resp.StatusCode))
					continue
				}
				lats[i] = append(lats[i], d)
				if think > 0 {
					time.Sleep(think)
				}
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(t0)
	for _, l := range lats {
		res.lat = append(res.lat, l...)
	}
	slices.Sort(res.lat)
	if m := e.counts(ctx); m != nil {
		res.queued, res.running, res.done = m[jobs.Queued], m[jobs.Running], m[jobs.Succeeded]
	}
	res.warns, res.firstW = e.log.summary()
	return res
}

func reportSubmit(o opts, dbs []db, rs []submitResult) {
	fmt.Printf("### POST /v1/prompts under load\n\n")
	fmt.Printf("%d requests per run from C clients in a closed loop, each pausing the think time after every answer; %d worker slots, provider %v per call. Latencies in ms, min / median / max over %d runs.\n\n",
		o.n, o.workers, o.latency, o.runs)
	fmt.Println("| database | auth | clients | think | requests/s | p50 | p99 | max | non-202 | queued at end |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	type key struct {
		db, auth string
		think    time.Duration
		clients  int
	}
	var keys []key
	for _, d := range dbs {
		for _, auth := range o.auths {
			for _, think := range o.thinks {
				for _, c := range o.clients {
					keys = append(keys, key{d.name, auth, think, c})
				}
			}
		}
	}
	for _, k := range keys {
		var rate, p50, p99, mx, queued []float64
		bad := 0
		for _, r := range rs {
			if (key{r.db, r.auth, r.think, r.clients}) != k {
				continue
			}
			rate = append(rate, float64(len(r.lat))/r.wall.Seconds())
			p50 = append(p50, msd(pct(r.lat, 50)))
			p99 = append(p99, msd(pct(r.lat, 99)))
			mx = append(mx, msd(pct(r.lat, 100)))
			queued = append(queued, float64(r.queued))
			r.codes.mu.Lock()
			for _, n := range r.codes.m {
				bad += n
			}
			r.codes.mu.Unlock()
		}
		if len(rate) == 0 {
			continue
		}
		fmt.Printf("| %s | %s | %d | %v | %s | %s | %s | %s | %d | %.0f |\n", k.db, k.auth, k.clients, k.think,
			spread(rate, thousands),
			spread(p50, ms), spread(p99, ms), spread(mx, ms), bad, median(queued))
	}
	fmt.Println()
}
