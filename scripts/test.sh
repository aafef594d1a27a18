#!/usr/bin/env bash
# Runs every check of the project on a new machine: formatting, lints, the Rust
# tests (against private redis-servers the tests start themselves), and the
# shell, browser and fuzz tests under tests/. Installs what is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/lib.sh

ensure_redis
command -v curl >/dev/null || ensure_packages curl

echo "== cargo fmt --check"
cargo fmt --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

echo "== shellcheck"
command -v shellcheck >/dev/null || ensure_packages shellcheck
shellcheck scripts/*.sh scripts/with-lock tests/shell/*.sh tests/*/run.sh

echo "== cargo build"
cargo build --quiet --all-targets

log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== cargo test"
timeout --kill-after=30s 45m cargo test --quiet 2>&1 | tee -a "$log"

# Each script runs under a time limit, so that one that hangs fails on its own
# (with its output so far) instead of holding up the whole run.
TEST_TIMEOUT=${TEST_TIMEOUT:-20m}
status=0
for t in tests/shell/*_test.sh tests/*/run.sh; do
  [ -e "$t" ] || continue
  echo "== $t"
  set +e
  timeout --kill-after=30s "$TEST_TIMEOUT" bash "$t" 2>&1 </dev/null | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || status=1
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "0 passed, 1 failed" | tee -a "$log"
    echo "$t: did not finish within $TEST_TIMEOUT" >&2
  fi
done

# One closing line for everything: cargo's "test result" lines and the
# "N passed, N failed" lines of the shell, browser and fuzz tests.
passed=$(sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed.*/\1/p; s/^([0-9]+) passed, [0-9]+ failed$/\1/p' "$log" | awk '{ n += $1 } END { print n + 0 }')
failed=$(sed -nE 's/^test result: [a-zA-Z]+\. [0-9]+ passed; ([0-9]+) failed.*/\1/p; s/^[0-9]+ passed, ([0-9]+) failed$/\1/p' "$log" | awk '{ n += $1 } END { print n + 0 }')
if [ "$status" -ne 0 ]; then
  echo "all: ${passed:-0} passed, ${failed:-0} failed"
  echo "some shell, browser or fuzz tests failed" >&2
  exit 1
fi
echo "== all checks passed"
echo "all: ${passed:-0} passed, ${failed:-0} failed"
