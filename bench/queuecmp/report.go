package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

type report struct {
	Date      string              `json:"date"`
	Cores     int                 `json:"cores"`
	GoVersion string              `json:"go_version"`
	Options   options             `json:"options"`
	Setups    map[string]string   `json:"setups"`
	Bulk      []bulkResult        `json:"bulk"`
	Steady    []steadyTrialResult `json:"steady"`
}

// mmm is min / median / max.
type mmm struct{ Min, Median, Max float64 }

func summarize(xs []float64) mmm {
	if len(xs) == 0 {
		return mmm{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return mmm{s[0], med, s[len(s)-1]}
}

func (m mmm) String(format string) string {
	return fmt.Sprintf(format+" / "+format+" / "+format, m.Min, m.Median, m.Max)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func (r report) markdown(w io.Writer, systems []system) {
	var names []string
	for _, s := range systems {
		names = append(names, s.Name())
	}
	o := r.Options
	fmt.Fprintf(w, "%s, %d cores, %s. %d runs; bulk: %d jobs, batches of %d; promptkit Claim Limit %d.\n\n",
		r.Date, r.Cores, r.GoVersion, o.Runs, o.N, o.Batch, o.ClaimLimit)
	keys := make([]string, 0, len(r.Setups))
	for k := range r.Setups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "- %s: %s\n", k, r.Setups[k])
	}
	fmt.Fprintln(w)

	if len(r.Bulk) > 0 {
		hdr := "| database | measure |"
		sep := "|---|---|"
		for _, n := range names {
			hdr += " " + n + " jobs/s min / median / max |"
			sep += "---|"
		}
		if len(names) == 2 {
			hdr += " " + names[1] + " / " + names[0] + " (medians) |"
			sep += "---|"
		}
		fmt.Fprintln(w, hdr)
		fmt.Fprintln(w, sep)
		for _, db := range o.DBs {
			type row struct {
				label string
				pick  func(b bulkResult) (float64, bool)
			}
			rows := []row{{fmt.Sprintf("insert (batches of %d)", o.Batch), func(b bulkResult) (float64, bool) { return b.InsertJPS, true }}}
			for _, wk := range o.Workers {
				rows = append(rows, row{fmt.Sprintf("work, %d workers", wk), func(b bulkResult) (float64, bool) { return b.WorkJPS, b.Workers == wk }})
			}
			for _, rw := range rows {
				line := fmt.Sprintf("| %s | %s |", db, rw.label)
				var meds []float64
				for _, n := range names {
					var xs []float64
					for _, b := range r.Bulk {
						if v, ok := rw.pick(b); ok && b.DB == db && b.System == n {
							xs = append(xs, v)
						}
					}
					m := summarize(xs)
					meds = append(meds, m.Median)
					line += fmt.Sprintf(" %s (n=%d) |", m.String("%.0f"), len(xs))
				}
				if len(meds) == 2 {
					line += " **" + ratio(meds[1], meds[0]) + "** |"
				}
				fmt.Fprintln(w, line)
			}
		}
		fmt.Fprintln(w)
	}

	if len(r.Steady) > 0 {
		fmt.Fprintf(w, "Steady state: %d producers, one job per transaction, %s, %d workers; per run p50/p99 over all jobs, then min / median / max over runs (ms).\n\n",
			o.Producers, o.Steady, o.SteadyWork)
		fmt.Fprintln(w, "Handles: same, producers and workers on one store handle (River: one client); 2, on two (own pools and LISTEN connections, River: an insert-only client and a working one), as two processes would be.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| database | system | handles | inserts/s | insert p50 | insert p99 | insert→start p50 | insert→start p99 | not started (max) |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, db := range o.DBs {
			for _, cross := range []bool{false, true} {
				for _, n := range names {
					r.steadyRow(w, db, n, cross)
				}
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, strings.TrimSpace(`Raw samples: -json.`))
}

// steadyRow prints the steady-state row of one database, system and
// handle setup, if it was measured.
func (r report) steadyRow(w io.Writer, db, n string, cross bool) {
	var ips, ip50, ip99, sp50, sp99 []float64
	ns := 0
	for _, s := range r.Steady {
		if s.DB != db || s.System != n || s.Cross != cross {
			continue
		}
		ips = append(ips, s.InsertJPS)
		ip50 = append(ip50, s.InsertP50)
		ip99 = append(ip99, s.InsertP99)
		sp50 = append(sp50, s.StartP50)
		sp99 = append(sp99, s.StartP99)
		ns = max(ns, s.NotStarted)
	}
	if len(ips) == 0 {
		return
	}
	handles := "same"
	if cross {
		handles = "2"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", db, n, handles,
		summarize(ips).String("%.0f"), summarize(ip50).String("%.1f"), summarize(ip99).String("%.1f"),
		summarize(sp50).String("%.1f"), summarize(sp99).String("%.1f"), ns)
}
