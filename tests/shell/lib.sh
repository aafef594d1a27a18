# shellcheck shell=bash
# Test harness for shell tests: a private redis-server and baton on free ports,
# both stopped when the test exits. Source it, then call `start_stack`.
# Exposes BATON_URL, REDIS_PORT, BATON_PID, REDIS_PID.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
. "$ROOT/scripts/lib.sh"

BATON_BIN=${BATON_BIN:-$ROOT/target/debug/baton}
TEST_TMP=$(mktemp -d)
PASSED=0
FAILED=0

# Other processes a test starts (e.g. a browser driver) to stop on exit.
TRACKED_PIDS=()

# Stops PID: SIGTERM, then SIGKILL if it is still there after 10 s, so that a
# process that does not stop cannot hold up the test run.
stop_pid() {
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "# pid $pid did not stop within 10 s of SIGTERM: killed" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
}

cleanup_stack() {
  local pid
  for pid in "${TRACKED_PIDS[@]}"; do
    stop_pid "$pid"
  done
  [ -n "${BATON_PID:-}" ] && stop_pid "$BATON_PID"
  [ -n "${REDIS_PID:-}" ] && stop_pid "$REDIS_PID"
  rm -rf "$TEST_TMP"
}
trap cleanup_stack EXIT

# Starts redis-server and baton (extra env for baton may be given as NAME=VALUE args).
start_stack() {
  ensure_redis
  [ -x "$BATON_BIN" ] || (cd "$ROOT" && cargo build --quiet)
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$TEST_TMP" --logfile "$TEST_TMP/redis.log" &
  REDIS_PID=$!
  wait_for_redis "$REDIS_PORT"
  local port
  port=$(free_port)
  env BATON_LISTEN="127.0.0.1:$port" BATON_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
    BATON_KEY_PREFIX="shell-test:" RUST_LOG="${RUST_LOG:-warn}" "$@" \
    "$BATON_BIN" >"$TEST_TMP/baton.log" 2>&1 &
  BATON_PID=$!
  BATON_URL="http://127.0.0.1:$port"
  export BATON_URL
  wait_for_http "$BATON_URL/healthz" 30
}

pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }

# Prints the summary line and returns non-zero if anything failed.
finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
