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

echo "== cargo build"
cargo build --quiet --all-targets

echo "== cargo test"
cargo test --quiet

status=0
for t in tests/shell/*_test.sh; do
  [ -e "$t" ] || continue
  echo "== $t"
  bash "$t" || status=1
done
for t in tests/*/run.sh; do
  [ -e "$t" ] || continue
  echo "== $t"
  bash "$t" || status=1
done
if [ "$status" -ne 0 ]; then
  echo "some shell, browser or fuzz tests failed" >&2
  exit 1
fi
echo "== all checks passed"
