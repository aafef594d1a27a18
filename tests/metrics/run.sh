#!/usr/bin/env bash
# /metrics passes `promtool check metrics` (Debian's prometheus package,
# installed when missing) with nothing reported, after traffic of every kind;
# and it has what an operator needs: HELP on every metric, baton_build_info,
# Redis errors by kind, leases ended by expiry, waiters by kind (never by
# name), and request latency that leaves out the time spent waiting in line.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
trap 'exit 130' INT TERM

if ! { command -v promtool >/dev/null 2>&1 || ensure_packages prometheus; } || ! start_stack BATON_KEY_PREFIX=metrics-test:; then
  fail "setup: promtool, redis-server and baton"
  finish
  exit 1
fi

name="metrics-$$-name"
# A holder, a waiter that waits a whole second in vain, a release, a
# semaphore, a lease that is not there; then the metrics. A step that fails
# is a failed check (not an abort without a summary).
traffic() {
  local lease id
  lease=$(curl -fsS -X POST -d '{"ttl_ms": 60000}' "$BATON_URL/locks/$name") || return 1
  id=$(printf '%s' "$lease" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || return 1
  curl -sS -o /dev/null -X POST -d '{"wait_ms": 1000}' "$BATON_URL/locks/$name" || return 1
  curl -fsS -o /dev/null -X DELETE "$BATON_URL/locks/$name/$id" || return 1
  curl -fsS -o /dev/null -X POST -d '{"limit": 2}' "$BATON_URL/semaphores/$name" || return 1
  curl -sS -o /dev/null "$BATON_URL/locks/$name/00000000-0000-4000-8000-000000000000" || return 1
  curl -fsS "$BATON_URL/metrics" >"$TEST_TMP/metrics.txt"
}
if ! traffic; then
  fail "traffic of every kind and GET /metrics (see above)"
  finish
  exit 1
fi

if report=$(promtool check metrics <"$TEST_TMP/metrics.txt" 2>&1) && [ -z "$report" ]; then
  pass "promtool check metrics reports nothing"
else
  fail "promtool check metrics: $report"
fi

# Every metric has HELP text.
no_help=$(python3 - "$TEST_TMP/metrics.txt" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
typed = {l.split()[2] for l in lines if l.startswith("# TYPE ")}
helped = {l.split()[2] for l in lines if l.startswith("# HELP ") and len(l.split()) > 3}
print(" ".join(sorted(typed - helped)) or ("" if typed else "no metrics at all"))
PY
) || no_help="the check itself failed: $no_help"
if [ -z "$no_help" ]; then pass "HELP text on every metric"; else fail "no HELP for: $no_help"; fi

undocumented=$(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$TEST_TMP/metrics.txt" | while read -r metric; do
  grep -q "| \`$metric\` |" "$ROOT/docs/operations.md" || printf '%s ' "$metric"
done)
if [ -z "$undocumented" ]; then pass "docs/operations.md lists every metric"; else fail "not in docs/operations.md: $undocumented"; fi

expect() {
  local what=$1 pattern=$2
  if grep -qE "$pattern" "$TEST_TMP/metrics.txt"; then pass "$what"; else fail "$what: no line matches $pattern"; fi
}
expect "baton_build_info with the version and the source revision" \
  '^baton_build_info\{version="[0-9]+\.[0-9]+\.[0-9]+[^"]*",revision="([0-9a-f]{7,}|unknown)"\} 1$'
for kind in timeout connection auth server script other; do
  expect "Redis errors of kind $kind" "^baton_redis_errors_total\\{kind=\"$kind\"\\} [0-9]+$"
done
expect "leases ended by expiry, locks" '^baton_leases_expired_total\{kind="lock"\} [0-9]+$'
expect "leases ended by expiry, semaphores" '^baton_leases_expired_total\{kind="semaphore"\} [0-9]+$'
expect "waiters by kind" '^baton_waiters\{kind="lock"\} 0$'
if grep -q "$name" "$TEST_TMP/metrics.txt"; then
  fail "a lock or semaphore name is a label: $(grep -m1 "$name" "$TEST_TMP/metrics.txt")"
else
  pass "no series is labelled with a lock or semaphore name"
fi

# The waiter spent about a second in line: its acquisition wait shows it, the
# request latency does not (every POST /locks/{name} answered under 250 ms).
verdict=$(python3 - "$TEST_TMP/metrics.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def value(pattern):
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None
route = r'method="POST",route="/locks/\{name\}"'
def series(suffix, extra=""):
    for line in text.splitlines():
        if line.startswith("baton_http_request_duration_seconds" + suffix) and 'route="/locks/{name}"' in line and 'method="POST"' in line and extra in line:
            return float(line.rsplit(" ", 1)[1])
    return None
count = series("_count")
under = series("_bucket", 'le="0.25"')
waited = value(r'^baton_acquire_wait_seconds_sum\{kind="lock",outcome="busy"\} (\S+)$')
if count is None or under is None or waited is None:
    print(f"missing series: count={count} under_250ms={under} busy_wait_sum={waited}")
elif count < 2 or under != count:
    print(f"{count} POST /locks/{{name}} requests, only {under} under 250 ms")
elif waited < 0.9:
    print(f"the busy acquisition waited {waited}s, expected about 1 s")
else:
    print("ok")
PY
) || verdict="the check itself failed: $verdict"
if [ "$verdict" = ok ]; then
  pass "request latency leaves out the second spent waiting; the wait histogram has it"
else
  fail "latency apart from waiting: $verdict"
fi
finish
