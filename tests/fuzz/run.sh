#!/usr/bin/env bash
# Property-based fuzzing of the HTTP API with schemathesis, against the
# service's own /openapi.json: every operation, every phase (examples,
# coverage, fuzzing, stateful), every check (no 5xx; status code, content
# type, headers and body as documented; valid data accepted, invalid data
# rejected; released leases gone). Installs schemathesis (pinned in
# requirements.txt) into tests/fuzz/.venv. Reports go to tests/fuzz/artifacts/.
#
# Env: FUZZ_MAX_EXAMPLES (default 300 per operation: 1 to 2 minutes here),
# FUZZ_SEED (default: a new one each run, so that every run explores other
# cases). The seed is printed; FUZZ_SEED=N with the same FUZZ_MAX_EXAMPLES
# generates that run's cases again (the stateful phase also follows what the
# service answered, e.g. lease ids, so it may differ in detail).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
# Ctrl-C or SIGTERM: exit, so the EXIT trap stops everything started.
trap 'exit 130' INT TERM

VENV=$HERE/.venv
MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-300}
SEED=${FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
REPLAY="FUZZ_SEED=$SEED FUZZ_MAX_EXAMPLES=$MAX_EXAMPLES bash tests/fuzz/run.sh"

# Creates the venv and installs schemathesis as pinned, unless it is there.
ensure_schemathesis() {
  local want have=""
  want=$(sed -n 's/^schemathesis==//p' "$HERE/requirements.txt")
  if [ -x "$VENV/bin/schemathesis" ]; then
    have=$("$VENV/bin/schemathesis" --version 2>/dev/null | sed -n 's/.*version //p')
  fi
  [ "$want" = "$have" ] && return 0
  echo "installing schemathesis $want into $VENV" >&2
  if [ ! -x "$VENV/bin/python" ]; then
    rm -rf "$VENV"
    if ! python3 -m venv "$VENV" 2>/dev/null; then
      # Debian's python3 needs python3-venv for ensurepip.
      rm -rf "$VENV"
      ensure_packages python3-venv
      python3 -m venv "$VENV"
    fi
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"
}

setup() {
  command -v python3 >/dev/null 2>&1 || ensure_packages python3 python3-venv
  ensure_schemathesis
  # A ticket granted while nobody waits on it holds its name for the
  # pickup: 2 s here, not 5 minutes, so that later cases find names free.
  start_stack BATON_KEY_PREFIX=fuzz-test: BATON_PICKUP_MS=2000
}

if ! setup; then
  fail "setup: schemathesis, redis-server and baton"
  [ -f "$TEST_TMP/baton.log" ] && tail -n 20 "$TEST_TMP/baton.log"
  finish
  exit 1
fi

REPORTS=$HERE/artifacts
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# GET /events is a stream that never ends by design (tests/api/watching.rs
# covers it); every other operation is fuzzed.
echo "schemathesis against $BATON_URL/openapi.json: --max-examples $MAX_EXAMPLES --seed $SEED"
echo "replay this run with: $REPLAY"
status=0
(cd "$TEST_TMP" && exec env SCHEMATHESIS_HOOKS="$HERE/hooks.py" \
  "$VENV/bin/schemathesis" run "$BATON_URL/openapi.json" \
  --checks all \
  --workers 1 \
  --max-examples "$MAX_EXAMPLES" \
  --seed "$SEED" \
  --generation-database none \
  --request-timeout 20 \
  --exclude-path /events \
  --no-color \
  --report junit,har \
  --report-dir "$REPORTS") &
TRACKED_PIDS+=("$!")
wait "$!" || status=$?

if [ "$status" -eq 0 ]; then
  pass "schemathesis: every response as documented, no server error"
else
  fail "schemathesis exited $status with seed $SEED (see above; reports in $REPORTS; replay: $REPLAY)"
  [ -f "$TEST_TMP/baton.log" ] && { echo "--- baton log (last lines)"; tail -n 20 "$TEST_TMP/baton.log"; }
fi
# Nothing the fuzzer did may have broken the service.
if curl -fsS -o /dev/null "$BATON_URL/readyz"; then
  pass "baton is still ready after the fuzz run"
else
  fail "baton is not ready after the fuzz run"
fi
finish
