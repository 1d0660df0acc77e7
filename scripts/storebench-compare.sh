#!/usr/bin/env bash
# Measures the job stores' micro-benchmarks (bench/storebench) of an older
# commit and of the working tree side by side: both are compiled once,
# then run alternately, the first to run swapping every pair, and each
# side's runs summarised as min / median / max with the ratio of medians.
#
# Usage: scripts/storebench-compare.sh REF DB PAIRS [BENCH]   (DB: postgres or sqlite;
# BENCH, a regexp, keeps only the sub-benchmarks it matches, e.g. 'Enqueue|Cycle1')
# PostgreSQL runs use PROMPTKIT_TEST_DATABASE_URL (default: the loopback
# test database).
set -euo pipefail
ref=${1:?usage: $0 REF postgres|sqlite PAIRS [BENCH]}; db=${2:?}; pairs=${3:?}; only=${4:-.}
top=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$top" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export PROMPTKIT_TEST_DATABASE_URL=${PROMPTKIT_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}

git -C "$top" worktree add --detach "$work/old" "$ref" >/dev/null
(cd "$work/old/bench" && go test -c -o "$work/old.test" ./storebench)
(cd "$top/bench" && go test -c -o "$work/new.test" ./storebench)
for i in $(seq 1 "$pairs"); do
  order="old new"; [ $((i % 2)) -eq 0 ] && order="new old"
  for side in $order; do
    "$work/$side.test" -test.run '^$' -test.bench "Store/db=$db/($only)" -test.count 1 | sed "s/^Benchmark/$side /" >> "$work/out"
  done
done
awk '
$1 == "old" || $1 == "new" {
  name=$2; sub(/-[0-9]+$/, "", name); sub(/^Store\/db=[a-z]+\//, "", name)
  for (i=3; i<NF; i++) if ($(i+1)=="jobs/s" || $(i+1)=="p50-µs" || $(i+1)=="p99-µs") {
    key=name " " $(i+1); v[$1, key]=v[$1, key] " " $i
    if (!(key in seen)) { seen[key]=1; order[++n]=key }
  }
}
function sorted(s, a,   k, i, j, t) {
  k=split(s, a, " ")
  for (i=2; i<=k; i++) { t=a[i]; for (j=i-1; j>0 && a[j]+0>t+0; j--) a[j+1]=a[j]; a[j+1]=t }
  return k
}
function median(a, k) { return (k%2) ? a[(k+1)/2] : (a[k/2]+a[k/2+1])/2 }
END {
  printf "| benchmark | pairs | old min / median / max | new min / median / max | new / old (medians) |\n|---|---|---|---|---|\n"
  for (i=1; i<=n; i++) {
    k=sorted(v["old", order[i]], o); sorted(v["new", order[i]], w)
    printf "| %s | %d | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.2f |\n", order[i], k,
      o[1], median(o, k), o[k], w[1], median(w, k), w[k], median(w, k) / median(o, k)
  }
}' "$work/out"
