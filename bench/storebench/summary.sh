#!/usr/bin/env bash
# Summarises storebench output (go test -bench ... -count N) read on stdin:
# per benchmark, min / median / max over the runs of jobs/s (enqueue and
# cycle benchmarks) or of the claim latency percentiles (ClaimLatency100k).
# Usage: go test ./storebench -run '^$' -bench . -count 5 | storebench/summary.sh
set -euo pipefail
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkStore\//, "", name)
  for (i=3; i<NF; i++) {
    u=$(i+1)
    if (u=="jobs/s" || u=="p50-µs" || u=="p99-µs") {
      key=name SUBSEP u
      v[key]=v[key] " " $i
      if (!(key in seen)) { seen[key]=1; order[++n]=key }
    }
  }
}
function sorted(s, a,   k, i, j, t) {
  k=split(s, a, " ")
  for (i=2; i<=k; i++) { t=a[i]; for (j=i-1; j>0 && a[j]+0>t+0; j--) a[j+1]=a[j]; a[j+1]=t }
  return k
}
function median(a, k) { return (k%2) ? a[(k+1)/2] : (a[k/2]+a[k/2+1])/2 }
END {
  printf "| benchmark | metric | runs | min | median | max |\n|---|---|---|---|---|---|\n"
  for (i=1; i<=n; i++) {
    split(order[i], p, SUBSEP); k=sorted(v[order[i]], a)
    printf "| %s | %s | %d | %.0f | %.0f | %.0f |\n", p[1], p[2], k, a[1], median(a, k), a[k]
  }
}'
