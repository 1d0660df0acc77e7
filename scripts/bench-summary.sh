#!/usr/bin/env bash
# Summarises `go test -bench` output read on stdin: for each benchmark,
# min/median/max of ns/op and the median B/op and allocs/op over -count runs.
# Usage: go test -run '^$' -bench . -count 6 . | scripts/bench-summary.sh
set -euo pipefail
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name)
  for (i=3; i<=NF; i++) {
    if ($(i+1)=="ns/op") ns[name]=ns[name] " " $i
    if ($(i+1)=="B/op") bytes[name]=bytes[name] " " $i
    if ($(i+1)=="allocs/op") allocs[name]=allocs[name] " " $i
  }
  if (!(name in seen)) { seen[name]=1; order[++n]=name }
}
function sorted(s, a,   k, i, j, t) {
  k=split(s, a, " ")
  for (i=2; i<=k; i++) { t=a[i]; for (j=i-1; j>0 && a[j]+0>t+0; j--) a[j+1]=a[j]; a[j+1]=t }
  return k
}
function median(s,   a, k) { k=sorted(s, a); return (k%2) ? a[(k+1)/2] : (a[k/2]+a[k/2+1])/2 }
END {
  printf "| benchmark | runs | ns/op min | median | max | B/op | allocs/op |\n|---|---|---|---|---|---|---|\n"
  for (i=1; i<=n; i++) {
    b=order[i]; k=sorted(ns[b], a)
    printf "| %s | %d | %d | %d | %d | %d | %d |\n", b, k, a[1], median(ns[b]), a[k], median(bytes[b]), median(allocs[b])
  }
}'
