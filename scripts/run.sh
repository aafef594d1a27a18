#!/usr/bin/env bash
# Runs baton on a new machine: builds it, makes sure there is a Redis to use,
# and serves in the foreground until Ctrl-C or SIGTERM.
#
# When BATON_REDIS_URL is unset and no Redis answers on 127.0.0.1:6379, starts
# a private redis-server (installing Debian's package if missing) with its data
# under .data/ and append-only persistence, and stops it again on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/lib.sh

command -v cargo >/dev/null || { echo "cargo is needed: install Rust from rustup" >&2; exit 1; }
echo "building baton (release)..." >&2
cargo build --release --locked --bin baton

redis_pid=""
stop_redis() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
}
trap stop_redis EXIT

# BATON_DEV_REDIS_PORT (default 6379) and BATON_DATA_DIR (default .data) move
# the Redis this script looks for and starts, e.g. for tests.
if [ -z "${BATON_REDIS_URL:-}" ]; then
  ensure_redis
  port=${BATON_DEV_REDIS_PORT:-6379}
  if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
    echo "using the Redis on 127.0.0.1:$port" >&2
  else
    data=${BATON_DATA_DIR:-$ROOT/.data}
    mkdir -p "$data"
    data=$(cd "$data" && pwd)
    echo "starting a private redis-server on 127.0.0.1:$port (data in $data)" >&2
    redis-server --bind 127.0.0.1 --port "$port" --dir "$data" \
      --appendonly yes --appendfsync everysec --save "" \
      --logfile "$data/redis.log" &
    redis_pid=$!
    wait_for_redis "$port"
  fi
  export BATON_REDIS_URL="redis://127.0.0.1:$port"
fi

# Not exec: the trap must stop the private Redis after baton exits.
target/release/baton &
baton_pid=$!
# shellcheck disable=SC2317 # called by the trap below
forward() { kill -TERM "$baton_pid" 2>/dev/null || true; }
trap forward INT TERM
status=0
wait "$baton_pid" || status=$?
# A trapped signal ends `wait` early with 128+n; wait again for baton's own
# status (bash keeps it even once baton has exited).
for _ in 1 2 3; do
  [ "$status" -gt 128 ] || break
  status=0
  wait "$baton_pid" || status=$?
done
stop_redis
trap - EXIT
exit "$status"
