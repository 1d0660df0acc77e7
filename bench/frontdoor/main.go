// Command frontdoor measures promptkit's OpenAI-compatible front door
// against a `promptkit serve` process built from this tree:
//
//   - batch: an N-line batch (POST /v1/files, POST /v1/batches, polled
//     until it ends) against a providertest fake that allows -rate
//     requests per second and answers 429 with Retry-After beyond that.
//     It reports failed lines, wall time against the ideal (lines / rate),
//     extra provider calls, and the resident memory of serve (VmRSS
//     sampled every 100 ms, and VmHWM at the end).
//   - chat: the same chat completion sent -chat times to each target, one
//     request at a time, the targets in turn: promptkit's
//     /v1/chat/completions and the provider directly, for p50/p99 latency
//     side by side. -baseline adds a second promptkit binary (one built
//     from an earlier commit) as a target of its own, with its own serve,
//     so that two builds are compared within one run; -extra adds this
//     tree's serve, and the provider directly, with requests that carry
//     more parameters.
//
// Every run starts a fresh serve per target on a fresh SQLite database,
// or with -database on a fresh schema of that PostgreSQL database
// (dropped after; the serves share the database's notification channel
// and ignore each other's notifications). The configurations alternate
// within each run.
//
//	cd bench && go run ./frontdoor -runs 2               # 10,000 lines at 100/s: about 100 s per configuration and run
//	cd bench && go run ./frontdoor -only chat -chat 2000
//	cd bench && go run ./frontdoor -only chat -baseline /tmp/promptkit-old -database 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	cd bench && go run ./frontdoor -lines 1000 -runs 1   # a quick look
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/bench/internal/pkbin"
	"github.com/promptkit/promptkit/providertest"
)

// config is one way to configure serve's backend for the batch.
type config struct {
	name string
	// rps is the backend's requests_per_second, 0 for none.
	rps float64
}

func main() {
	lines := flag.Int("lines", 10000, "batch lines")
	rate := flag.Int("rate", 100, "provider's limit, requests per second")
	latency := flag.Duration("latency", 0, "provider latency per answer")
	workers := flag.Int("workers", 0, "serve --workers (0: serve's default)")
	runs := flag.Int("runs", 2, "runs of each configuration")
	chatN := flag.Int("chat", 1000, "chat requests per target and run")
	only := flag.String("only", "", "batch or chat (default both)")
	cfgs := flag.String("configs", "unpaced,paced", "batch configurations: unpaced (no requests_per_second), paced (requests_per_second = -rate)")
	verbose := flag.Bool("v", false, "show serve's log tail after each run")
	bin := flag.String("bin", "", "the promptkit binary to measure (default: build cmd/promptkit of this tree)")
	baseline := flag.String("baseline", "", "chat: also measure this promptkit binary, side by side with -bin")
	extra := flag.String("extra", "", `chat: also send requests with these JSON members added, to -bin's serve and to the provider directly (e.g. '"top_k":20')`)
	database := flag.String("database", "", "a postgres:// URL on loopback: serve runs on a fresh schema of it (default: a fresh SQLite file)")
	flag.Parse()

	var batchCfgs []config
	for _, c := range strings.Split(*cfgs, ",") {
		switch c {
		case "unpaced":
			batchCfgs = append(batchCfgs, config{"unpaced", 0})
		case "paced":
			batchCfgs = append(batchCfgs, config{"paced", float64(*rate)})
		default:
			fatal(fmt.Errorf("unknown configuration %q", c))
		}
	}
	if *bin == "" {
		b, cleanup, err := pkbin.Build()
		fatal(err)
		defer cleanup()
		*bin = b
	}
	env := env{bin: *bin, workers: *workers, verbose: *verbose, database: *database}
	dbName := "SQLite"
	if *database != "" {
		if !benchkit.Loopback(*database) {
			fatal(fmt.Errorf("-database %q: want PostgreSQL on loopback", *database))
		}
		fatal(benchkit.DropLeftovers(context.Background(), *database, schemaPrefix))
		dbName = "PostgreSQL"
	}
	targets := chatTargets(*bin, *baseline, *extra)

	fmt.Printf("frontdoor: %s, %d cores, %s, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), dbName)
	batches := map[string][]batchResult{}
	var chats []chatResult
	for r := 1; r <= *runs; r++ {
		if *only == "" || *only == "chat" {
			c, err := env.chat(targets, *chatN)
			fatal(err)
			fmt.Printf("run %d chat:", r)
			for i, t := range targets {
				fmt.Printf(" %s p50 %v p99 %v", t.name, c[i].p50, c[i].p99)
				if t.bin != "" {
					fmt.Printf(" CPU %v/request", c[i].cpu.Round(time.Microsecond))
				}
				fmt.Print(";")
			}
			fmt.Printf(" load average %s\n", loadAverage())
			chats = append(chats, c)
		}
		if *only == "" || *only == "batch" {
			for _, cfg := range batchCfgs {
				b, err := env.batch(cfg, *lines, *rate, *latency)
				fatal(err)
				fmt.Printf("run %d batch %s: %s\n", r, cfg.name, b)
				batches[cfg.name] = append(batches[cfg.name], b)
			}
		}
	}
	fmt.Println()
	if len(batches) > 0 {
		reportBatches(batchCfgs, batches, *lines, *rate)
	}
	if len(chats) > 0 {
		reportChats(targets, chats, *chatN)
	}
}

// target is where one series of chat requests goes: a promptkit serve
// run from bin, or the provider directly (bin ""); extra is JSON members
// added to each request.
type target struct{ name, bin, extra string }

// chatTargets lists the chat targets: the baseline's serve (if any),
// bin's, bin's with extra members (if any), then the provider directly
// with the same requests.
func chatTargets(bin, baseline, extra string) []target {
	var ts []target
	if baseline != "" {
		ts = append(ts, target{"baseline " + baseline, baseline, ""})
	}
	ts = append(ts, target{"promptkit /v1/chat/completions", bin, ""})
	if extra != "" {
		ts = append(ts, target{"promptkit, with " + extra, bin, extra})
	}
	ts = append(ts, target{"provider directly", "", ""})
	if extra != "" {
		ts = append(ts, target{"provider directly, with " + extra, "", extra})
	}
	return ts
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "frontdoor:", err)
		os.Exit(1)
	}
}

type env struct {
	bin      string
	workers  int
	verbose  bool
	database string // a PostgreSQL URL, "" for SQLite
}

// schemaPrefix names the PostgreSQL schemas of the runs.
const schemaPrefix = "frontdoor"

// serve is a running `promptkit serve` in a directory of its own.
type serve struct {
	*pkbin.Serve
	dir  string
	drop func() error // removes its PostgreSQL schema; nil on SQLite
}

// start runs bin's serve with backends named by id → base URL (each with
// a profile of the same id) and extra YAML for the backend "limited".
func (e env) start(bin string, backends map[string]string, limitedExtra string) (_ *serve, err error) {
	dir, err := os.MkdirTemp("", "frontdoor-run-")
	if err != nil {
		return nil, err
	}
	s := &serve{dir: dir}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	var cfg strings.Builder
	cfg.WriteString("backends:\n")
	for _, id := range slices.Sorted(maps.Keys(backends)) {
		fmt.Fprintf(&cfg, "  - id: %s\n    base_url: %s\n", id, backends[id])
		if id == "limited" && limitedExtra != "" {
			cfg.WriteString(limitedExtra)
		}
	}
	cfg.WriteString("profiles:\n")
	for _, id := range slices.Sorted(maps.Keys(backends)) {
		fmt.Fprintf(&cfg, "  - {id: %s, backend: %s, model: %s-model}\n", id, id, id)
	}
	cfgPath := filepath.Join(dir, "promptkit.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "jobs.db")
	if e.database != "" {
		var schema string
		if schema, s.drop, err = benchkit.NewSchema(context.Background(), e.database, schemaPrefix); err != nil {
			return nil, err
		}
		if db, err = benchkit.WithSearchPath(e.database, schema); err != nil {
			return nil, err
		}
	}
	args := []string{"--config", cfgPath, "--database", db, "--addr", "127.0.0.1:0", "--submit-rate", "-1"}
	if e.workers > 0 {
		args = append(args, "--workers", strconv.Itoa(e.workers))
	}
	if s.Serve, err = pkbin.StartServe(bin, filepath.Join(dir, "serve.log"), 30*time.Second, args...); err != nil {
		return nil, err
	}
	return s, nil
}

// stop ends serve (SIGKILL after 20 s) and removes its files and schema.
func (s *serve) stop() {
	if s.Serve != nil {
		s.Stop(20 * time.Second)
	}
	if s.drop != nil {
		if err := s.drop(); err != nil {
			fmt.Fprintln(os.Stderr, "frontdoor: dropping a schema:", err)
		}
	}
	os.RemoveAll(s.dir)
}

// client is a keep-alive HTTP client for loopback.
var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// batchResult is one batch run.
type batchResult struct {
	status         string
	upload         time.Duration
	wall           time.Duration // batch created → seen completed
	completed      int
	failed         int // request_counts.failed
	errorLines     int
	calls          int // provider chat calls
	rateLimited    int // the provider's 429s
	rssStart       int // KiB, before the upload
	rssMedian      int // KiB, median of samples during the batch
	rssMax, hwm    int // KiB
	serveWarnLines int
	// phases: the batch's own timestamps (whole seconds): created →
	// in_progress → finalizing → completed.
	validating, running, finalizing int64
	// load is the machine's 1-minute load average at the end.
	load string
}

func (b batchResult) String() string {
	return fmt.Sprintf("%s in %.2f s (upload %.2f s; validating %d s, in progress %d s, finalizing %d s): %d completed, %d failed, %d error lines; %d provider calls, %d 429s; RSS start %d MiB, median %d MiB, max %d MiB, HWM %d MiB; %d warn/error log lines; load average %s",
		b.status, b.wall.Seconds(), b.upload.Seconds(), b.validating, b.running, b.finalizing, b.completed, b.failed, b.errorLines, b.calls, b.rateLimited,
		b.rssStart>>10, b.rssMedian>>10, b.rssMax>>10, b.hwm>>10, b.serveWarnLines, b.load)
}

type batchObject struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
	Counts       struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
	CreatedAt    int64 `json:"created_at"`
	InProgressAt int64 `json:"in_progress_at"`
	FinalizingAt int64 `json:"finalizing_at"`
	CompletedAt  int64 `json:"completed_at"`
}

func (e env) batch(cfg config, lines, rate int, latency time.Duration) (batchResult, error) {
	var res batchResult
	prov := providertest.NewServer(providertest.WithRateLimit(rate), providertest.WithLatency(latency), providertest.WithMaxRecorded(1))
	defer prov.Close()
	extra := ""
	if cfg.rps > 0 {
		extra = fmt.Sprintf("    requests_per_second: %g\n", cfg.rps)
	}
	s, err := e.start(e.bin, map[string]string{"limited": prov.URL}, extra)
	if err != nil {
		return res, err
	}
	defer s.stop()
	res.rssStart, _ = s.Memory()

	var in bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&in, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"limited","messages":[{"role":"user","content":"question number %d"}]}}`+"\n", i, i)
	}
	t0 := time.Now()
	fileID, err := upload(s.URL, in.Bytes())
	if err != nil {
		return res, err
	}
	res.upload = time.Since(t0)

	// Sample serve's memory while the batch runs.
	stopSampling := make(chan struct{})
	var samples []int
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if rss, _ := s.Memory(); rss > 0 {
					samples = append(samples, rss)
				}
			}
		}
	})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopSampling); wg.Wait() }) }
	defer stop()

	start := time.Now()
	var b batchObject
	if err := benchkit.CallJSON(client, http.MethodPost, s.URL+"/v1/batches", "application/json",
		strings.NewReader(fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, fileID)), &b); err != nil {
		return res, err
	}
	// Give up after three times the ideal, plus a minute.
	giveUp := start.Add(3*time.Duration(lines)*time.Second/time.Duration(rate) + time.Minute)
	for !benchkit.BatchTerminal(b.Status) {
		if time.Now().After(giveUp) {
			return res, fmt.Errorf("batch still %s (%+v) after %v:\n%s", b.Status, b.Counts, time.Since(start), s.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
		if err := benchkit.CallJSON(client, http.MethodGet, s.URL+"/v1/batches/"+b.ID, "", nil, &b); err != nil {
			return res, err
		}
	}
	res.wall = time.Since(start)
	stop()

	res.status, res.completed, res.failed = b.Status, b.Counts.Completed, b.Counts.Failed
	res.validating, res.running, res.finalizing = b.InProgressAt-b.CreatedAt, b.FinalizingAt-b.InProgressAt, b.CompletedAt-b.FinalizingAt
	if b.ErrorFileID != "" {
		n, err := countLines(s.URL + "/v1/files/" + b.ErrorFileID + "/content")
		if err != nil {
			return res, err
		}
		res.errorLines = n
	}
	if b.OutputFileID != "" {
		n, err := countLines(s.URL + "/v1/files/" + b.OutputFileID + "/content")
		if err != nil {
			return res, err
		}
		if n != b.Counts.Completed {
			return res, fmt.Errorf("output file has %d lines, request_counts.completed %d", n, b.Counts.Completed)
		}
	}
	st := prov.Stats()
	res.calls, res.rateLimited = st.Requests-st.Models, st.RateLimited
	_, res.hwm = s.Memory()
	if len(samples) > 0 {
		slices.Sort(samples)
		res.rssMedian, res.rssMax = samples[len(samples)/2], samples[len(samples)-1]
	}
	res.serveWarnLines = s.Warnings()
	res.load = loadAverage()
	if e.verbose {
		fmt.Println(s.Tail(15))
	}
	return res, nil
}

func upload(base string, content []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "batch")
	fw, err := mw.CreateFormFile("file", "batch.jsonl")
	if err != nil {
		return "", err
	}
	fw.Write(content)
	if err := mw.Close(); err != nil {
		return "", err
	}
	var f struct {
		ID string `json:"id"`
	}
	if err := benchkit.CallJSON(client, http.MethodPost, base+"/v1/files", mw.FormDataContentType(), &body, &f); err != nil {
		return "", err
	}
	return f.ID, nil
}

func countLines(url string) (int, error) {
	res, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	n := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	return n, sc.Err()
}

// percentiles of one target's latencies.
type percentiles struct{ p50, p99 time.Duration }

func percentilesOf(d []time.Duration) percentiles {
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return percentiles{at(0.50).Round(time.Microsecond), at(0.99).Round(time.Microsecond)}
}

// chatResult is one run's figures, one per target.
type chatResult []targetResult

// targetResult is one target's percentiles and, for a serve, its CPU time
// per request (user+system; 10 ms ticks over the whole run).
type targetResult struct {
	percentiles
	cpu time.Duration
}

// chat sends a chat completion n times to each target, one at a time,
// the targets in turn (each round starting one target later), all
// against the same provider.
func (e env) chat(ts []target, n int) (chatResult, error) {
	prov := providertest.NewServer(providertest.WithMaxRecorded(1))
	defer prov.Close()
	urls := make([]string, len(ts))
	serves := make([]*serve, len(ts))
	for i, t := range ts {
		if t.bin == "" {
			urls[i] = prov.URL + "/chat/completions"
			continue
		}
		s, err := e.start(t.bin, map[string]string{"fast": prov.URL}, "")
		if err != nil {
			return nil, err
		}
		defer s.stop()
		urls[i], serves[i] = s.URL+"/v1/chat/completions", s
	}
	cpu := func(i int) float64 {
		if serves[i] == nil {
			return 0
		}
		return serves[i].CPU()
	}
	// Each request its own question: the front door answers the same
	// request from the same caller with the job it already ran (an SDK's
	// retry), which would measure a lookup instead of a run.
	sent := 0
	send := func(i int) (time.Duration, error) {
		sent++
		model, extra := "fast", ""
		if ts[i].bin == "" {
			model = "fast-model"
		}
		if ts[i].extra != "" {
			extra = "," + ts[i].extra
		}
		b := fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"How far is the moon from the earth? (%d)"}],"max_tokens":64%s}`, model, sent, extra)
		t0 := time.Now()
		res, err := client.Post(urls[i], "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(t0)
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("POST %s: %d", urls[i], res.StatusCode)
		}
		return d, err
	}
	// Warm every path (connections, the database's first writes).
	for range 20 {
		for i := range ts {
			if _, err := send(i); err != nil {
				return nil, err
			}
		}
	}
	lat := make([][]time.Duration, len(ts))
	cpu0 := make([]float64, len(ts))
	for i := range ts {
		cpu0[i] = cpu(i)
	}
	for k := range n {
		for j := range ts {
			i := (k + j) % len(ts)
			d, err := send(i)
			if err != nil {
				return nil, err
			}
			lat[i] = append(lat[i], d)
		}
	}
	c := make(chatResult, len(ts))
	for i := range ts {
		c[i] = targetResult{percentilesOf(lat[i]), time.Duration((cpu(i) - cpu0[i]) * float64(time.Second) / float64(n))}
	}
	return c, nil
}

// minMedMax renders sorted values as "min / median / max".
func minMedMax[T any](vs []T, less func(a, b T) int, f func(T) string) string {
	slices.SortFunc(vs, less)
	return fmt.Sprintf("%s | %s | %s", f(vs[0]), f(vs[len(vs)/2]), f(vs[len(vs)-1]))
}

func reportBatches(cfgs []config, all map[string][]batchResult, lines, rate int) {
	ideal := time.Duration(lines) * time.Second / time.Duration(rate)
	fmt.Printf("Batch: %d lines, provider %d requests/s with Retry-After; ideal %v\n\n", lines, rate, ideal)
	fmt.Println("| configuration | runs | failed lines | wall s min | median | max | wall / ideal (median) | provider calls (median) | extra calls | 429s (median) | serve RSS MiB median | max | VmHWM MiB (max) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range cfgs {
		rs := all[c.name]
		if len(rs) == 0 {
			continue
		}
		failed := 0
		var walls []float64
		var calls, rl, rssMed, rssMax, hwm []int
		for _, r := range rs {
			failed = max(failed, r.failed+r.errorLines+(lines-r.completed-r.failed))
			walls = append(walls, r.wall.Seconds())
			calls = append(calls, r.calls)
			rl = append(rl, r.rateLimited)
			rssMed = append(rssMed, r.rssMedian)
			rssMax = append(rssMax, r.rssMax)
			hwm = append(hwm, r.hwm)
		}
		med := func(v []int) int { slices.Sort(v); return v[len(v)/2] }
		wall := minMedMax(walls, func(a, b float64) int { return cmpf(a, b) }, func(v float64) string { return fmt.Sprintf("%.1f", v) })
		medWall := walls[len(walls)/2]
		mc := med(calls)
		fmt.Printf("| %s | %d | %d (worst run) | %s | %.3f | %d | %.2f %% | %d | %d | %d | %d |\n",
			c.name, len(rs), failed, wall, medWall/ideal.Seconds(), mc, 100*float64(mc-lines)/float64(lines),
			med(rl), med(rssMed)>>10, slices.Max(rssMax)>>10, slices.Max(hwm)>>10)
	}
	fmt.Println()
}

func cmpf(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reportChats prints each target's percentiles; for each serve, the time
// it adds to the provider called directly with the same request and its
// CPU time per request, and both against the serve listed before it
// (this tree against the baseline; with extra members against without),
// run by run.
func reportChats(ts []target, cs []chatResult, n int) {
	fmt.Printf("Chat completions: %d requests per target and run, one at a time, the targets in turn; %d runs\n\n", n, len(cs))
	fmt.Println("| target | p50 µs min | median | max | p99 µs min | median | max |")
	fmt.Println("|---|---|---|---|---|---|---|")
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
	cmpd := func(a, b time.Duration) int { return cmpf(float64(a), float64(b)) }
	for i, t := range ts {
		var p50, p99 []time.Duration
		for _, c := range cs {
			p50, p99 = append(p50, c[i].p50), append(p99, c[i].p99)
		}
		fmt.Printf("| %s | %s | %s |\n", t.name, minMedMax(p50, cmpd, us), minMedMax(p99, cmpd, us))
	}
	f := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	// added is, per run, the time serve i adds at p50 and at p99.
	added := func(i int) (a50, a99 []float64) {
		d := slices.IndexFunc(ts, func(t target) bool { return t.bin == "" && t.extra == ts[i].extra })
		for _, c := range cs {
			a50 = append(a50, float64(c[i].p50-c[d].p50)/1e6)
			a99 = append(a99, float64(c[i].p99-c[d].p99)/1e6)
		}
		return a50, a99
	}
	cpu := func(i int) (v []float64) {
		for _, c := range cs {
			v = append(v, float64(c[i].cpu.Microseconds()))
		}
		return v
	}
	fmt.Println("\nadded to the provider called directly, ms, and serve's CPU time per request, µs (min | median | max):")
	prev := -1
	for i, t := range ts {
		if t.bin == "" {
			continue
		}
		a50, a99 := added(i)
		c := cpu(i)
		fmt.Printf("  %s: p50 %s; p99 %s; CPU %s\n", t.name, minMedMax(slices.Clone(a50), cmpf, f), minMedMax(slices.Clone(a99), cmpf, f),
			minMedMax(slices.Clone(c), cmpf, func(v float64) string { return fmt.Sprintf("%.0f", v) }))
		if prev >= 0 {
			b50, b99 := added(prev)
			bc := cpu(prev)
			var r50, r99, rc []float64
			for k := range cs {
				r50, r99, rc = append(r50, a50[k]/b50[k]), append(r99, a99[k]/b99[k]), append(rc, c[k]/bc[k])
			}
			fmt.Printf("    / %s, run by run: added p50 %s; added p99 %s; CPU %s\n", ts[prev].name,
				minMedMax(r50, cmpf, f), minMedMax(r99, cmpf, f), minMedMax(rc, cmpf, f))
		}
		prev = i
	}
}
