#!/usr/bin/env bash
# Redis's own CPU per call of baton's functions, beside the first version's
# scripts (fa1f1fc) and the classic recipe (SET NX PX + compare-and-delete),
# on one private Redis (issue 46):
#
#   scripts/redis_cost.sh
#
# Starts a redis-server on a free loopback port (never a Redis it did not
# start), takes the first version's Lua scripts from the repository's history
# (git show), and runs examples/redis_cost.rs: every function called directly
# from one pipelined connection, many times, on the states that matter (a
# free name, a held name, a line of 1, 100 and 10,000 waiters and its
# hand-off), each figure from Redis's own counters (INFO commandstats: the
# usec of the top-level FCALL or EVALSHA, which includes the commands it
# runs; INFO cpu beside it), medians of the rounds. What each column means:
# the program's header. The client's build does not change Redis's figures:
# the example is built in the dev profile (warm in target/), unless
# REDIS_COST_PROFILE=release.
#
# Knobs (environment): REDIS_COST_ROUNDS (3), REDIS_COST_REPS (10 phases of
# REDIS_COST_NAMES calls each per round and state), REDIS_COST_NAMES (200),
# BENCH_BASELINE (the first version: fa1f1fc).
# The table goes to stdout and target/bench/redis_cost.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

BASELINE=${BENCH_BASELINE-fa1f1fc}
PROFILE=${REDIS_COST_PROFILE:-dev}
ensure_redis
command -v redis-cli >/dev/null 2>&1 || ensure_packages redis-tools
command -v python3 >/dev/null 2>&1 || ensure_packages python3

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-redis-cost.XXXXXX")
REDIS_PID=
cleanup() {
  if [ -n "$REDIS_PID" ]; then
    kill -TERM "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --quiet --profile "$PROFILE" --example redis_cost
dir=debug
[ "$PROFILE" = dev ] || dir=$PROFILE
BIN=$ROOT/target/$dir/examples/redis_cost

mkdir -p "$WORK/first"
for script in lock_acquire lock_release lock_refresh; do
  git show "$BASELINE:src/engine/lua/$script.lua" >"$WORK/first/$script.lua"
done

PORT=$(free_port)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
REDIS_PID=$!
wait_for_redis "$PORT"

mkdir -p target/bench
{
  echo "redis_cost: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src 2>/dev/null || echo '+changes')" \
    "vs $BASELINE, redis $(redis-server --version | sed -E 's/.* v=([^ ]+).*/\1/'), $(date -u +%Y-%m-%dT%H:%MZ)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$BIN" --redis "127.0.0.1:$PORT" --first "$WORK/first" \
    --rounds "${REDIS_COST_ROUNDS:-3}" --reps "${REDIS_COST_REPS:-10}" --names "${REDIS_COST_NAMES:-200}"
} | tee target/bench/redis_cost.md
