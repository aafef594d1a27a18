#!/usr/bin/env bash
# Runs every check of the project on a new machine: formatting, lints, the Rust
# tests (against private redis-servers the tests start themselves), and the
# shell, browser and fuzz tests under tests/. Installs what is missing.
#
# Whatever happens, it ends with one closing line:
#   all: P passed, F failed, S skipped
# S counts every check that did not run: the `skip` lines of the test scripts
# and cargo's ignored tests (the line before it gives each). A step that fails
# without saying how many of its checks failed (fmt, clippy, a build, a
# script that exits non-zero without a failing "N passed, N failed" line, a
# test binary that dies before its result) counts as 1 failed. The exit
# status is non-zero whenever F is.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
. scripts/lib.sh

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0 failed=0 skipped=0 ignored=0
failures=()

# Counts one failed check, named in the list printed at the end.
failure() {
  failed=$((failed + 1))
  failures+=("$1")
  echo "FAILED: $1" >&2
}

# Runs a step that is one check: `step NAME COMMAND...`.
step() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); else failure "$name"; fi
}

# Prints what did not run or failed, the closing line, and exits.
close() {
  if [ ${#failures[@]} -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${failures[@]}"
  else
    echo "== all checks passed"
  fi
  echo "not run: $skipped skipped by the test scripts, $ignored cargo tests ignored"
  echo "all: $passed passed, $failed failed, $((skipped + ignored)) skipped"
  [ "$failed" -eq 0 ]
  exit
}

step "redis-server installed" ensure_redis
command -v curl >/dev/null || step "curl installed" ensure_packages curl
step "cargo fmt --all --check" cargo fmt --all --check
# --workspace: baton and the tests' shared crate (tests/support, baton-testkit).
step "cargo clippy --workspace --all-targets -- -D warnings" \
  cargo clippy --workspace --all-targets --quiet -- -D warnings
# The docs, private items too: the crate documents its internals (module
# maps, long-lived state, the invariants beside the code that keeps them),
# and rustdoc checks the links of only the items it documents. Nothing is
# allowed: a public item's docs link only what a reader of them can reach.
step "cargo doc (broken links denied)" env \
  RUSTDOCFLAGS="-D warnings -D rustdoc::broken_intra_doc_links" \
  cargo doc --no-deps --document-private-items --quiet
command -v shellcheck >/dev/null || ensure_packages shellcheck
step "shellcheck" shellcheck scripts/*.sh scripts/with-lock tests/*/*.sh actions/lib/*.sh
step "actions, GitLab component and Kubernetes manifests against their schemas" scripts/check-ci-files.sh
echo "== cargo build"
if ! cargo build --workspace --quiet --all-targets; then
  failure "cargo build (nothing else can run)"
  close
fi

# The Rust tests: every test binary runs (--no-fail-fast), and its "test
# result" line is counted. A binary that failed without one (it crashed, or
# the build of a test failed) counts as 1 failed, as does a run that failed
# with no failure counted at all (a timeout). --workspace: the tests' shared
# crate's own tests too (the chaos checker's rules).
echo "== cargo test"
timeout --kill-after=30s 45m cargo test --workspace --quiet --no-fail-fast 2>&1 | tee "$out/cargo.log"
rc=${PIPESTATUS[0]}
read -r p f i failed_results failed_targets < <(awk '
  /^test result: / {
    for (k = 1; k <= NF; k++) {
      if ($(k + 1) ~ /^passed/) p += $k
      if ($(k + 1) ~ /^failed/) f += $k
      if ($(k + 1) ~ /^ignored/) i += $k
    }
    if ($3 == "FAILED.") r += 1
  }
  /^error: test failed, to rerun pass/ { t += 1 }
  END { print p + 0, f + 0, i + 0, r + 0, t + 0 }' "$out/cargo.log")
passed=$((passed + p))
ignored=$((ignored + i))
failed=$((failed + f))
[ "$f" -gt 0 ] && failures+=("cargo test: $f tests")
for _ in $(seq $((failed_targets - failed_results))); do
  failure "cargo test: a test binary failed without its result line (see above)"
done
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && [ "$failed_targets" -le "$failed_results" ]; then
  failure "cargo test exited $rc with no failed test counted"
fi

# Each script runs under a time limit, so that one that hangs fails on its own
# (with its output so far) instead of holding up the whole run.
TEST_TIMEOUT=${TEST_TIMEOUT:-20m}
for t in tests/shell/*_test.sh tests/*/run.sh; do
  [ -e "$t" ] || continue
  echo "== $t"
  log="$out/$(echo "$t" | tr / _).log"
  timeout --kill-after=30s "$TEST_TIMEOUT" bash "$t" 2>&1 </dev/null | tee "$log"
  rc=${PIPESTATUS[0]}
  # Its "N passed, N failed[, N skipped]" lines, and its "skip" lines.
  read -r p f s lines skips < <(awk '
    /^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$/ {
      p += $1; f += $3; if (NF == 6) s += $5; lines += 1
    }
    /^skip( |$)/ { k += 1 }
    END { print p + 0, f + 0, s + 0, lines + 0, k + 0 }' "$log")
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -gt 0 ] && failures+=("$t: $f checks")
  skipped=$((skipped + (s > skips ? s : skips)))
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    failure "$t: did not finish within $TEST_TIMEOUT"
  elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    failure "$t: exited $rc without a failing summary line"
  elif [ "$lines" -eq 0 ]; then
    failure "$t: no summary line (no check ran)"
  fi
done

close
