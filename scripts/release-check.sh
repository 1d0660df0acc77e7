#!/usr/bin/env bash
# Release check: formatting, vet, race tests, then the offline observation
# example (examples/observe) with assertions on its semantic output.
# Run from anywhere: ./scripts/release-check.sh
#
# Database tests, when they exist, use PROMPTKIT_TEST_DATABASE_URL if it is
# set and skip otherwise; CI (.ci/run) is what insists on the database.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf 'release-check: %s\n' "$*"; }
fail() { printf 'release-check: FAIL: %s\n' "$*" >&2; exit 1; }

step "go $(go env GOVERSION)"

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  printf '%s\n' "$unformatted" >&2
  fail "gofmt would change the files above"
fi

step "go vet ./..."
go vet ./...

step "go test -race ./..."
go test -race -count=1 ./...

step "go run ./examples/observe"
out=$(go run ./examples/observe) || fail "examples/observe exited non-zero"

# The example prints one JSON document with one run per line. Each check
# looks for an exact "key":value fragment on the run's line; the keys used
# here are unique within a line.
run_line() {
  local lines
  lines=$(grep -F "\"prompt_id\":\"$1\"" <<<"$out" || true)
  [ "$(grep -c . <<<"$lines")" -eq 1 ] || fail "want exactly one run of prompt $1 in: $out"
  printf '%s' "$lines"
}
expect() { # expect NAME LINE FRAGMENT...
  local name=$1 line=$2 frag
  shift 2
  for frag in "$@"; do
    grep -qF -- "$frag" <<<"$line" || fail "$name: missing $frag in: $line"
  done
}
refuse() { # refuse NAME LINE FRAGMENT...
  local name=$1 line=$2 frag
  shift 2
  for frag in "$@"; do
    if grep -qF -- "$frag" <<<"$line"; then fail "$name: unexpected $frag in: $line"; fi
  done
}

proposal=$(run_line propose)
expect proposal "$proposal" \
  '"profile_id":"proposer"' '"backend_id":"shared"' \
  '"attempts":2,' '"transient_retries":1,' '"repair_calls":0,' \
  '"finished_outcome":"success"' '"validation":"valid"' \
  '"retry_delay":1' '"status":429' \
  '"prompt_tokens":{"value":120,"known":true,"complete":false}'

assessment=$(run_line assess)
expect assessment "$assessment" \
  '"profile_id":"assessor"' '"backend_id":"shared"' \
  '"attempts":1,' '"transient_retries":0,' '"repair_calls":0,' \
  '"finished_outcome":"success"' '"validation":"valid"' \
  '"prompt_tokens":{"value":90,"known":true,"complete":true}'
refuse assessment "$assessment" '"retry_delay"'

expect summary "$out" '"assessment":"accepted"' '"provider_requests":3'
# Metadata only: nothing of the prompts, outputs or provider error text.
refuse summary "$out" 'quarterly' 'Ship the report' 'rate limited' 'provider.invalid'

step "OK"
