// Command bigbatch runs one very large OpenAI-style batch through a
// `promptkit serve` built from this tree, on the built-in simulated
// backend (in memory, zero latency), and reports each phase:
//
//   - upload: the JSONL is generated on the fly and streamed into POST
//     /v1/files (never built in memory, here or, if serve streams, there);
//   - validate+enqueue: POST /v1/batches until the batch is in_progress
//     with every request counted;
//   - work-off: until every line's job has finished (finalizing);
//   - finalize: finalizing → completed (the output file is written);
//   - download: the output and error files, streamed, every custom_id
//     checked to appear exactly once in the two together.
//
// For each it reports the duration, lines/s, serve's peak RSS within the
// phase (VmHWM, reset through /proc/<pid>/clear_refs at the phase's
// start) and serve's CPU time. Then the database's size per line before
// and after `promptkit jobs archive`.
//
// With -kill, serve is SIGKILLed once half the lines have finished,
// started again on the same database, and the batch must still end with
// every custom_id exactly once.
//
//	cd bench && go run ./bigbatch -lines 1000000
//	cd bench && go run ./bigbatch -lines 100000 -db postgres   # PROMPTKIT_TEST_DATABASE_URL or -pg
//	cd bench && go run ./bigbatch -lines 200000 -kill
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/promptkit/promptkit/bench/internal/benchkit"
	"github.com/promptkit/promptkit/bench/internal/pkbin"
)

func main() {
	lines := flag.Int("lines", 100_000, "batch lines")
	db := flag.String("db", "sqlite", "sqlite or postgres")
	pg := flag.String("pg", os.Getenv("PROMPTKIT_TEST_DATABASE_URL"), "PostgreSQL URL (a fresh schema is made in it and dropped after)")
	kill := flag.Bool("kill", false, "SIGKILL serve halfway through the work-off and start it again")
	pad := flag.Int("pad", 200, "bytes of prompt text per line (a realistic body; 1M lines of 200 are over the 200 MB default upload cap)")
	workers := flag.Int("workers", 0, "serve --workers (0: serve's default)")
	bin := flag.String("bin", "", "a promptkit binary to run (default: build cmd/promptkit of this tree)")
	keep := flag.Bool("keep", false, "keep the run's directory (serve's log, the SQLite file)")
	flag.Parse()
	if *db != "sqlite" && *db != "postgres" {
		fatal(fmt.Errorf("-db %q: want sqlite or postgres", *db))
	}
	if *bin == "" {
		b, cleanup, err := pkbin.Build()
		fatal(err)
		defer cleanup()
		*bin = b
	}
	r := &run{bin: *bin, lines: *lines, pad: *pad, workers: *workers, kill: *kill}
	dir, err := os.MkdirTemp("", "bigbatch-")
	fatal(err)
	r.dir = dir
	if !*keep {
		defer os.RemoveAll(dir)
	}
	r.database = filepath.Join(dir, "jobs.db")
	if *db == "postgres" {
		if *pg == "" {
			fatal(errors.New("-db postgres needs -pg or PROMPTKIT_TEST_DATABASE_URL"))
		}
		name, drop, err := benchkit.NewSchema(context.Background(), *pg, "bigbatch")
		fatal(err)
		defer drop()
		u, err := benchkit.WithSearchPath(*pg, name)
		fatal(err)
		r.database, r.pgBase, r.pgSchema = u, *pg, name
	}
	fmt.Printf("bigbatch: %s, %d cores, %s, %s, %d lines of ~%d bytes, kill %v\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), *db, *lines, *pad+150, *kill)
	err = r.do()
	if err != nil {
		if r.s != nil {
			fmt.Fprintln(os.Stderr, r.s.Tail(30))
		}
		if r.s != nil {
			r.s.Stop(30 * time.Second)
		}
		fatal(err)
	}
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigbatch:", err)
		os.Exit(1)
	}
}

type run struct {
	bin, dir, database string
	pgBase, pgSchema   string
	lines, pad         int
	workers            int
	kill               bool
	cfgPath            string
	s                  *pkbin.Serve
}

// phase is one measured phase.
type phase struct {
	name  string
	d     time.Duration
	lines int
	hwm   int     // KiB, serve's peak RSS within the phase
	anon  int     // KiB, serve's anonymous RSS at the end (heap, SQLite's cache)
	file  int     // KiB, serve's file-backed RSS at the end (mapped files)
	cpu   float64 // serve's CPU seconds within the phase
	note  string
}

func (p phase) String() string {
	rate := float64(p.lines) / p.d.Seconds()
	return fmt.Sprintf("%-16s %9.1f s %10.0f lines/s   peak RSS %5d MiB (end: anon %d MiB, file %d MiB)   serve CPU %7.1f s  %s",
		p.name, p.d.Seconds(), rate, p.hwm>>10, p.anon>>10, p.file>>10, p.cpu, p.note)
}

// meter measures one phase of serve.
type meter struct {
	s    *pkbin.Serve
	name string
	t0   time.Time
	cpu0 float64
}

func (r *run) start(name string) *meter {
	r.s.ResetPeak()
	return &meter{s: r.s, name: name, t0: time.Now(), cpu0: r.s.CPU()}
}

func (m *meter) end(lines int, note string) phase {
	_, hwm := m.s.Memory()
	p := phase{name: m.name, d: time.Since(m.t0), lines: lines, hwm: hwm, cpu: m.s.CPU() - m.cpu0, note: note}
	p.anon, p.file = m.s.Status("RssAnon:"), m.s.Status("RssFile:")
	fmt.Println(p)
	return p
}

func (r *run) do() error {
	// The simulated backend (no backends configured) answers at once, in
	// memory. The short heartbeat and reclaim let a killed serve's
	// running jobs go back to the queue in seconds rather than 5 minutes.
	cfg := fmt.Sprintf(`service:
  max_batch_lines: %d
  max_file_bytes: %d
  heartbeat_interval: 1s
  reclaim_after: 5s
  stuck_after: 10m
`, max(r.lines, 50_000), max(int64(r.lines)*int64(r.pad+400), 200<<20))
	r.cfgPath = filepath.Join(r.dir, "promptkit.yaml")
	if err := os.WriteFile(r.cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	var err error
	if r.s, err = r.startServe(); err != nil {
		return err
	}
	_, base := r.s.Memory()
	fmt.Printf("serve started: RSS %d MiB\n", base>>10)

	m := r.start("upload")
	fileID, size, err := r.upload()
	if err != nil {
		return err
	}
	m.end(r.lines, fmt.Sprintf("(%d MB, %.1f MB/s)", size/1e6, float64(size)/1e6/time.Since(m.t0).Seconds()))

	m = r.start("validate+enqueue")
	var b batchObject
	if err := benchkit.CallJSON(client, http.MethodPost, r.s.URL+"/v1/batches", "application/json",
		strings.NewReader(fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, fileID)), &b); err != nil {
		return err
	}
	if b, err = r.until(b.ID, 250*time.Millisecond, func(b batchObject) bool {
		return b.Status != "validating" && b.Counts.Total == r.lines || benchkit.BatchTerminal(b.Status)
	}); err != nil {
		return err
	}
	if b.Status != "in_progress" && b.Status != "finalizing" && b.Status != "completed" {
		return fmt.Errorf("batch %s after validation: %+v", b.Status, b)
	}
	m.end(r.lines, "")

	m = r.start("work-off")
	killed := false
	var down time.Duration
	for !benchkit.BatchTerminal(b.Status) && b.Status != "finalizing" {
		// Each read of an in_progress batch counts its jobs (seconds at a
		// million lines, see BENCHMARKS.md): a client polling every 10 s.
		time.Sleep(10 * time.Second)
		if err := benchkit.CallJSON(client, http.MethodGet, r.s.URL+"/v1/batches/"+b.ID, "", nil, &b); err != nil {
			return err
		}
		if r.kill && !killed && b.Counts.Completed+b.Counts.Failed >= r.lines/2 {
			killed = true
			_, hwm := r.s.Memory()
			t := time.Now()
			fmt.Printf("SIGKILL serve at %d of %d lines finished (peak RSS so far %d MiB)\n", b.Counts.Completed+b.Counts.Failed, r.lines, hwm>>10)
			r.s.Kill()
			if r.s, err = r.startServe(); err != nil {
				return err
			}
			down = time.Since(t)
			fmt.Printf("serve started again in %.1f s\n", down.Seconds())
			m.s, m.cpu0 = r.s, r.s.CPU()
		}
	}
	note := ""
	if killed {
		note = fmt.Sprintf("(includes %.1f s restart; CPU and peak RSS of the second serve)", down.Seconds())
	}
	m.end(r.lines, note)

	m = r.start("finalize")
	if b, err = r.until(b.ID, time.Second, func(b batchObject) bool { return benchkit.BatchTerminal(b.Status) }); err != nil {
		return err
	}
	m.end(r.lines, fmt.Sprintf("(%s: %d completed, %d failed)", b.Status, b.Counts.Completed, b.Counts.Failed))
	if b.Status != "completed" {
		return fmt.Errorf("batch ended %s", b.Status)
	}
	// The polls above see a phase end up to a poll late; the batch's own
	// stamps (whole seconds) say when each status began.
	fmt.Printf("the batch's stamps: validating %d s, in_progress %d s (%.0f lines/s), finalizing %d s\n",
		b.InProgressAt-b.CreatedAt, b.FinalizingAt-b.InProgressAt, float64(r.lines)/float64(max(1, b.FinalizingAt-b.InProgressAt)), b.CompletedAt-b.FinalizingAt)

	m = r.start("download")
	seen := make([]uint8, r.lines)
	var outLines, errLines, outBytes int64
	var bad []string
	for _, f := range []struct {
		id  string
		n   *int64
		out bool
	}{{b.OutputFileID, &outLines, true}, {b.ErrorFileID, &errLines, false}} {
		if f.id == "" {
			continue
		}
		nb, err := r.download(f.id, f.out, seen, f.n, &bad)
		if err != nil {
			return err
		}
		outBytes += nb
	}
	missing, twice := 0, 0
	for i, n := range seen {
		switch {
		case n == 0:
			if missing++; missing <= 3 {
				bad = append(bad, fmt.Sprintf("req-%d missing", i))
			}
		case n > 1:
			if twice++; twice <= 3 {
				bad = append(bad, fmt.Sprintf("req-%d %d times", i, n))
			}
		}
	}
	m.end(r.lines, fmt.Sprintf("(%d MB)", outBytes/1e6))
	verdict := "PASS"
	if missing > 0 || twice > 0 || len(bad) > 0 || outLines+errLines != int64(r.lines) {
		verdict = "FAIL"
	}
	fmt.Printf("check %s: %d output lines, %d error lines, %d custom_ids missing, %d repeated %v\n",
		verdict, outLines, errLines, missing, twice, bad)
	fmt.Printf("serve log: %d warn/error lines\n", r.s.Warnings())

	if err := r.sizes("before archive"); err != nil {
		return err
	}
	t := time.Now()
	out, err := exec.Command(r.bin, "jobs", "archive", "--before", time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"--yes", "--config", r.cfgPath, "--database", r.database).CombinedOutput()
	if err != nil {
		return fmt.Errorf("jobs archive: %w: %s", err, out)
	}
	fmt.Printf("jobs archive: %s in %.1f s\n", strings.TrimSpace(string(out)), time.Since(t).Seconds())
	if err := r.sizes("after archive"); err != nil {
		return err
	}
	r.s.Stop(30 * time.Second)
	r.s = nil
	if r.pgSchema != "" {
		// PostgreSQL keeps deleted rows' space for reuse; what the
		// archive freed shows once the tables are rewritten.
		if err := r.vacuumFull(); err != nil {
			return err
		}
		if err := r.sizes("after archive and VACUUM FULL"); err != nil {
			return err
		}
	}
	if verdict != "PASS" {
		return errors.New("check failed")
	}
	return nil
}

// upload streams a generated JSONL into POST /v1/files through a pipe.
func (r *run) upload() (id string, size int64, err error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	cw := &countWriter{}
	go func() {
		err := func() error {
			if err := mw.WriteField("purpose", "batch"); err != nil {
				return err
			}
			part, err := mw.CreateFormFile("file", "big.jsonl")
			if err != nil {
				return err
			}
			bw := bufio.NewWriterSize(io.MultiWriter(part, cw), 256<<10)
			filler := strings.Repeat("lorem ipsum ", r.pad/12+1)[:r.pad]
			for i := range r.lines {
				fmt.Fprintf(bw, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"default","max_tokens":16,"messages":[{"role":"user","content":"question %d: %s"}]}}`+"\n", i, i, filler)
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	var f struct {
		ID    string `json:"id"`
		Bytes int64  `json:"bytes"`
	}
	if err := benchkit.CallJSON(client, http.MethodPost, r.s.URL+"/v1/files", mw.FormDataContentType(), pr, &f); err != nil {
		return "", 0, fmt.Errorf("upload: %w", err)
	}
	if f.Bytes != cw.n {
		return "", 0, fmt.Errorf("upload stored %d bytes of %d", f.Bytes, cw.n)
	}
	return f.ID, f.Bytes, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// download streams a result file, counting each custom_id in seen.
func (r *run) download(id string, output bool, seen []uint8, n *int64, bad *[]string) (int64, error) {
	resp, err := client.Get(r.s.URL + "/v1/files/" + id + "/content")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET file %s: %s", id, resp.Status)
	}
	cr := &countReader{r: resp.Body}
	sc := bufio.NewScanner(cr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		*n++
		var l struct {
			CustomID string `json:"custom_id"`
			Response *struct {
				StatusCode int `json:"status_code"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return cr.n, fmt.Errorf("line %d of %s: %w", *n, id, err)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(l.CustomID, "req-"))
		if err != nil || i < 0 || i >= len(seen) {
			*bad = append(*bad, "unknown custom_id "+l.CustomID)
			continue
		}
		if seen[i] < 255 {
			seen[i]++
		}
		if output && (l.Response == nil || l.Response.StatusCode != 200) && len(*bad) < 10 {
			*bad = append(*bad, l.CustomID+" not 200 in the output file")
		}
	}
	return cr.n, sc.Err()
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// until polls the batch every interval until done says so.
func (r *run) until(id string, every time.Duration, done func(batchObject) bool) (batchObject, error) {
	var b batchObject
	for {
		if err := benchkit.CallJSON(client, http.MethodGet, r.s.URL+"/v1/batches/"+id, "", nil, &b); err != nil {
			return b, err
		}
		if done(b) {
			return b, nil
		}
		select {
		case <-r.s.Done():
			return b, errors.New("serve exited")
		case <-time.After(every):
		}
	}
}

// sizes prints the database's bytes, and bytes per line.
func (r *run) sizes(when string) error {
	per := func(n int64) string {
		return fmt.Sprintf("%d MB (%.0f bytes/line)", n/1e6, float64(n)/float64(r.lines))
	}
	if r.pgSchema != "" {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, r.pgBase)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var total, files int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')`, r.pgSchema).Scan(&total); err != nil {
			return fmt.Errorf("schema size: %w", err)
		}
		_ = conn.QueryRow(ctx, `SELECT coalesce(sum(bytes), 0)::bigint FROM `+pgx.Identifier{r.pgSchema, "files"}.Sanitize()).Scan(&files)
		fmt.Printf("database %s: schema %s; batch files' content %s\n", when, per(total), per(files))
		return nil
	}
	var total int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if st, err := os.Stat(r.database + suffix); err == nil {
			total += st.Size()
		}
	}
	db, err := sqliteUsage(r.database)
	if err != nil {
		return err
	}
	fmt.Printf("database %s: file+WAL %s; in use %s; batch files' content %s\n", when, per(total), per(db.used), per(db.files))
	return nil
}

// vacuumFull rewrites every table of the run's schema.
func (r *run) vacuumFull() error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.pgBase)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1`, r.pgSchema)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, "VACUUM FULL "+pgx.Identifier{r.pgSchema, t}.Sanitize()); err != nil {
			return fmt.Errorf("VACUUM FULL %s: %w", t, err)
		}
	}
	return nil
}

func (r *run) startServe() (*pkbin.Serve, error) {
	args := []string{"--config", r.cfgPath, "--database", r.database, "--addr", "127.0.0.1:0", "--submit-rate", "-1"}
	if r.workers > 0 {
		args = append(args, "--workers", strconv.Itoa(r.workers))
	}
	return pkbin.StartServe(r.bin, filepath.Join(r.dir, "serve.log"), 60*time.Second, args...)
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

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

// sqliteSizes are a SQLite database's bytes in use (pages not on the
// free list) and its files' content.
type sqliteSizes struct{ used, files int64 }

func sqliteUsage(path string) (sqliteSizes, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return sqliteSizes{}, err
	}
	defer db.Close()
	var pages, free, size int64
	var out sqliteSizes
	if err := db.QueryRow(`SELECT (SELECT page_count FROM pragma_page_count), (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_size FROM pragma_page_size)`).Scan(&pages, &free, &size); err != nil {
		return out, fmt.Errorf("sqlite pages: %w", err)
	}
	out.used = (pages - free) * size
	if err := db.QueryRow(`SELECT coalesce(sum(bytes), 0) FROM files`).Scan(&out.files); err != nil {
		return out, fmt.Errorf("sqlite files: %w", err)
	}
	return out, nil
}
