#!/usr/bin/env bash
# baton's benchmark, one command on a new machine:
#
#   scripts/bench.sh
#
# Builds release (this build, examples/loadgen.rs and examples/floor.rs, and
# once the first version fa1f1fc), starts a private redis-server and baton on
# free loopback ports, and measures with examples/loadgen.rs, in one run,
# against fixed baselines that never change with baton:
#   - the floors (examples/floor.rs, issue 37): the thinnest lock service on
#     baton's own stack (axum, hyper, tokio, redis-rs from the same
#     Cargo.lock), answering the same POST /locks/{name} and
#     DELETE /locks/{name}/{id} over HTTP/1.1 with nothing else in them:
#     the Redis-backed floor runs the classic recipe on one multiplexed
#     connection, the HTTP floor keeps its locks in memory. What baton costs
#     above them is baton's own work; they have no waiting line, so they run
#     the uncontended lock only;
#   - the first version (fa1f1fc), a build of the repository's history;
#   - the classic recipe on Redis alone, no HTTP: SET key id NX PX ttl and a
#     compare-and-delete script (EVALSHA), the counting-semaphore script
#     (ZREMRANGEBYSCORE, ZCARD, ZADD) and ZREM, through redis-rs with the same
#     clients in the same loop, each client on its own connection (shown
#     beside it: the same clients sharing one pipelined connection).
# With BENCH_COMPARE=<rev>, a build of that revision too (before and after a
# change in one run, e.g. BENCH_COMPARE=c0e91c6).
# Every side takes its turn, round after round, on the same Redis (FLUSHALL
# between runs; fa1f1fc sends EVALSHA scripts and this build FCALLs its
# functions library, so they do not clash): the uncontended lock and
# semaphore (each client its own name) and the contended lock (all clients on
# one name, acquire with wait_ms then release, in a closed loop). Each round
# starts with the next side, so that none always goes first.
# Throughput on 2 shared cores swings by 30% from round to round: every figure
# is the median of the rounds (each round's shown beside it), the targets are
# judged on medians, and CPU per operation (steadier than operations per
# second) is what most targets compare. Server CPU (baton's, a floor's), its
# kernel part apart, is from /proc/PID/stat (utime, stime) over the window;
# Redis's work per cycle comes from INFO (CPU: used_cpu_sys + used_cpu_user;
# commands: the calls of INFO commandstats, which count the commands run
# inside scripts and functions), and in the first round a MONITOR count of
# one client's cycles checks the command count.
# Then this build alone: the contended semaphore, HTTP/2, expensive reads next
# door (hammer), a 3-master Redis Cluster, and idle waiters (memory per
# waiting request). Everything it starts is stopped on exit; it never touches
# a Redis it did not start. Where baton's CPU goes, layer by layer:
# scripts/profile.sh.
#
# Knobs (environment): BENCH_CLIENTS (16), BENCH_ROUNDS (3 alternated rounds),
# BENCH_DURATION (4 s per window), BENCH_WINDOWS (1 per run), BENCH_WAITERS
# (10000), BENCH_IDLE_SECONDS (10), BENCH_H2_CONNECTIONS (1: the connections
# the HTTP/2 clients share), BENCH_HAMMER (16 clients repeating the largest
# status and listing calls; 0 skips), BENCH_HAMMER_HOLDERS (10000 holders of
# the semaphore they read), BENCH_HAMMER_LOCKS (10000 held locks they list),
# BENCH_MONITOR_CYCLES (200 cycles counted with MONITOR; 0 skips),
# BENCH_CLUSTER (1; 0 skips the cluster run), BENCH_FLOORS (1; 0 skips the
# floors), BENCH_STRICT=1 (exit 1 when a target is missed), BENCH_BATON
# (another baton binary to measure, e.g. a build of a branch; default: the one
# built here), BENCH_BASELINE (the commit of the first version: fa1f1fc; ""
# skips it), BENCH_COMPARE (a revision built beside, in target/bench-compare,
# and measured in the same rounds; unset: none), BENCH_REDIS_COST (1: at the
# end, scripts/redis_cost.sh, Redis's own time per call of every function
# beside the first version's scripts, appended to the report; 0 skips),
# BENCH_BUILD (1; 0: the release builds in target/release as they are, e.g.
# when a commit alone would rebuild them: build.rs embeds it).
# Results: target/bench/results.env (every raw figure) and target/bench/report.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

CLIENTS=${BENCH_CLIENTS:-16}
ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-4}
WINDOWS=${BENCH_WINDOWS:-1}
WAITERS=${BENCH_WAITERS:-10000}
IDLE_SECONDS=${BENCH_IDLE_SECONDS:-10}
H2_CONNECTIONS=${BENCH_H2_CONNECTIONS:-1}
HAMMER=${BENCH_HAMMER:-16}
HAMMER_HOLDERS=${BENCH_HAMMER_HOLDERS:-10000}
HAMMER_LOCKS=${BENCH_HAMMER_LOCKS:-10000}
MONITOR_CYCLES=${BENCH_MONITOR_CYCLES:-200}
CLUSTER=${BENCH_CLUSTER:-1}
BASELINE=${BENCH_BASELINE-fa1f1fc}
COMPARE=${BENCH_COMPARE:-}
FLOORS=${BENCH_FLOORS:-1}
WAIT_MS=10000
SEM_LIMIT=4

say() { printf '== %s\n' "$*" >&2; }

# --- tools ------------------------------------------------------------------
ensure_redis
command -v redis-cli >/dev/null 2>&1 || ensure_packages redis-tools
command -v curl >/dev/null 2>&1 || ensure_packages curl
command -v python3 >/dev/null 2>&1 || ensure_packages python3

# 10,000 waiting clients are 10,000 sockets in the load generator and as many
# in baton: raise the open-files limit (both inherit it from this shell).
need=$((WAITERS + 1024))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need" ]; then
  ulimit -Hn "$need" 2>/dev/null || true
fi
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge "$need" ]; then
  ulimit -n "$need"
else
  ulimit -n "$hard"
  WAITERS=$((hard - 1024))
  say "open-files limit is $hard: measuring $WAITERS idle waiters instead of ${BENCH_WAITERS:-10000}"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
  git worktree prune 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build --------------------------------------------------------------------
if [ "${BENCH_BUILD:-1}" = 1 ]; then
  say "cargo build --release (baton, examples/loadgen and examples/floor)"
  cargo build --release --quiet --bin baton --example loadgen --example floor
fi
BATON=${BENCH_BATON:-$ROOT/target/release/baton}
LOADGEN=$ROOT/target/release/examples/loadgen
FLOOR=$ROOT/target/release/examples/floor

# The first version, built once from the repository's history and kept in
# target/bench-baseline.
BASE_BIN=
if [ -n "$BASELINE" ]; then
  git rev-parse -q --verify "$BASELINE^{commit}" >/dev/null 2>&1 ||
    { echo "BENCH_BASELINE=$BASELINE is not a commit here" >&2; exit 1; }
  BASE_BIN=$ROOT/target/bench-baseline/release/baton
  if [ ! -x "$BASE_BIN" ] || [ "$(cat "$ROOT/target/bench-baseline/commit" 2>/dev/null)" != "$BASELINE" ]; then
    say "building the first version ($BASELINE) once, into target/bench-baseline"
    git worktree add --detach --quiet "$WORK/baseline" "$BASELINE"
    (cd "$WORK/baseline" && CARGO_TARGET_DIR=$ROOT/target/bench-baseline cargo build --release --quiet --bin baton)
    git worktree remove --force "$WORK/baseline"
    echo "$BASELINE" >"$ROOT/target/bench-baseline/commit"
  fi
fi

# A revision to set beside this build (BENCH_COMPARE): built in a worktree
# of it, into target/bench-compare (its dependencies stay built there for the
# next revision), each revision's binary kept by its commit.
COMPARE_BIN=
if [ -n "$COMPARE" ]; then
  sha=$(git rev-parse -q --verify "$COMPARE^{commit}") ||
    { echo "BENCH_COMPARE=$COMPARE is not a commit here" >&2; exit 1; }
  COMPARE=$(git rev-parse --short "$sha")
  COMPARE_BIN=$ROOT/target/bench-compare/bin/$sha
  if [ ! -x "$COMPARE_BIN" ]; then
    say "building $COMPARE once, into target/bench-compare"
    git worktree add --detach --quiet "$WORK/compare" "$sha"
    (cd "$WORK/compare" && CARGO_TARGET_DIR=$ROOT/target/bench-compare cargo build --release --quiet --bin baton)
    mkdir -p "$(dirname "$COMPARE_BIN")"
    cp "$ROOT/target/bench-compare/release/baton" "$COMPARE_BIN"
    git worktree remove --force "$WORK/compare"
  fi
fi

OUT=$ROOT/target/bench
mkdir -p "$OUT"
RESULTS=$OUT/results.env
: >"$RESULTS"

# --- Redis ----------------------------------------------------------------------
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
PIDS+=($!)
wait_for_redis "$REDIS_PORT"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

{
  echo "meta.date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "meta.commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo '+changes')"
  echo "meta.cpus=$(nproc)"
  echo "meta.cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  echo "meta.redis_version=$(redis-server --version | sed -E 's/.* v=([^ ]+).*/\1/')"
  echo "meta.clients=$CLIENTS"
  echo "meta.rounds=$ROUNDS"
  echo "meta.duration=$DURATION"
  echo "meta.windows=$WINDOWS"
  echo "meta.wait_ms=$WAIT_MS"
  echo "meta.sem_limit=$SEM_LIMIT"
  echo "meta.baseline=${BASELINE:-none}"
  echo "meta.compare=${COMPARE:-none}"
  echo "meta.load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$RESULTS"

# --- baton ------------------------------------------------------------------------
# baton, or a floor (which reads the same BATON_LISTEN, BATON_REDIS_URL and
# BATON_KEY_PREFIX): BATON_PID and BATON_PORT are the server's.
BATON_PID=
BATON_PORT=
start_baton() { # log-name binary [args...]
  BATON_PORT=$(free_port)
  local log=$WORK/baton-$1.log
  shift
  # The idle run holds $WAITERS connections plus the load generator's own:
  # above the default cap of 10,000 connections.
  BATON_LISTEN=127.0.0.1:$BATON_PORT BATON_REDIS_URL=redis://127.0.0.1:$REDIS_PORT \
    BATON_KEY_PREFIX=bench: BATON_MAX_CONNECTIONS=$((WAITERS + 1024)) \
    "$@" >"$log" 2>&1 &
  BATON_PID=$!
  PIDS+=("$BATON_PID")
  wait_for_http "http://127.0.0.1:$BATON_PORT/readyz" 30
}
stop_baton() {
  kill -TERM "$BATON_PID" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$BATON_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$BATON_PID" 2>/dev/null || true
  wait "$BATON_PID" 2>/dev/null || true
  rcli flushall >/dev/null
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# The load generator against the running baton (target=baton) or, with
# target=classic, the classic recipe on the private Redis.
drive() { # target label args...
  local target=(--target "127.0.0.1:$BATON_PORT" --baton-pid "$BATON_PID")
  [ "$1" = classic ] && target=(--classic "127.0.0.1:$REDIS_PORT")
  local label=$2
  shift 2
  "$LOADGEN" run "${target[@]}" --redis "127.0.0.1:$REDIS_PORT" --clients "$CLIENTS" \
    --warmup 1 --duration "$DURATION" --windows "$WINDOWS" \
    --label "$label" --out "$RESULTS" "$@" >/dev/null
}

# Counts with MONITOR what Redis runs for MONITOR_CYCLES cycles of one client,
# the commands of scripts and functions included (MONITOR shows them as
# "[0 lua]" lines): a check of the INFO commandstats count the table uses.
monitor_check() { # target series args...
  local target=(--target "127.0.0.1:$BATON_PORT")
  [ "$1" = classic ] && target=(--classic "127.0.0.1:$REDIS_PORT")
  local series=$2 file=$WORK/monitor-$2.txt mon
  shift 2
  [ "$MONITOR_CYCLES" -gt 0 ] || return 0
  redis-cli -p "$REDIS_PORT" monitor >"$file" &
  mon=$!
  PIDS+=("$mon")
  for _ in $(seq 50); do
    [ -s "$file" ] && break
    sleep 0.1
  done
  "$LOADGEN" run "${target[@]}" --clients 1 --max-ops "$MONITOR_CYCLES" --warmup 0 \
    --duration 60 --windows 1 --label "mon_$series" "$@" >/dev/null
  sleep 0.2
  kill "$mon" 2>/dev/null || true
  wait "$mon" 2>/dev/null || true
  {
    echo "mon_$series.monitor_cycles=$MONITOR_CYCLES"
    echo "mon_$series.monitor_commands=$(grep -E '^[0-9.]+ \[' "$file" | grep -vcE '\] "(info|monitor)"')"
  } >>"$RESULTS"
  rcli flushall >/dev/null
}

# One side's turn in a round. The labels of its runs are its prefix ("" this
# build, "c" BENCH_COMPARE, "v" the first version, "r" the Redis-backed
# floor, "f" the HTTP floor, "k" the classic recipe), the workload (ul, us,
# cl) and the round's number: rul2 is the Redis-backed floor's uncontended
# lock in round 2.
turn() { # side round
  local side=$1 round=$2 s
  case $side in
    now) s= ;;
    compare) s=c ;;
    first) s=v ;;
    rfloor) s=r ;;
    floor) s=f ;;
    classic) s=k ;;
  esac
  case $side in
    classic)
      say "round $round: the classic recipe, lock and semaphore"
      drive classic "kul$round" --kind lock --names each
      rcli flushall >/dev/null
      drive classic "kus$round" --kind sem --limit "$SEM_LIMIT" --names each
      rcli flushall >/dev/null
      # Beside it, not a target: the clients on one connection that redis-rs
      # pipelines, as baton pipelines its own calls.
      drive classic "pul$round" --kind lock --names each --connections 1
      rcli flushall >/dev/null
      if [ "$round" = 1 ]; then
        monitor_check classic kul --kind lock
        monitor_check classic kus --kind sem --limit "$SEM_LIMIT"
      fi
      return
      ;;
    rfloor | floor)
      local store=memory
      [ "$side" = rfloor ] && store=redis
      say "round $round: the floor ($store), uncontended lock"
      start_baton "$side-$round" "$FLOOR" "$store"
      drive baton "${s}ul$round" --kind lock --names each
      [ "$round" = 1 ] && [ "$side" = rfloor ] && monitor_check baton "${s}ul" --kind lock
      stop_baton
      return
      ;;
    now)
      say "round $round: this build"
      start_baton "now-$round" "$BATON"
      ;;
    compare)
      say "round $round: $COMPARE (BENCH_COMPARE)"
      start_baton "compare-$round" "$COMPARE_BIN"
      ;;
    first)
      say "round $round: the first version ($BASELINE)"
      start_baton "first-$round" "$BASE_BIN"
      ;;
  esac
  drive baton "${s}ul$round" --kind lock --names each
  drive baton "${s}us$round" --kind sem --limit "$SEM_LIMIT" --names each
  drive baton "${s}cl$round" --kind lock --names one --wait-ms "$WAIT_MS"
  if [ "$round" = 1 ]; then
    monitor_check baton "${s}ul" --kind lock
    monitor_check baton "${s}us" --kind sem --limit "$SEM_LIMIT"
  fi
  stop_baton
}

SIDES=(now)
[ -n "$COMPARE_BIN" ] && SIDES+=(compare)
[ -n "$BASE_BIN" ] && SIDES+=(first)
[ "$FLOORS" = 1 ] && SIDES+=(rfloor floor)
SIDES+=(classic)
for round in $(seq "$ROUNDS"); do
  # Each round starts with the next side, so that none always goes first.
  n=${#SIDES[@]}
  for i in $(seq 0 $((n - 1))); do
    turn "${SIDES[$(((round - 1 + i) % n))]}" "$round"
  done
done

# --- this build alone -----------------------------------------------------------
start_baton main "$BATON"
echo "rest.baton_rss_kb=$(rss_kb "$BATON_PID")" >>"$RESULTS"
say "this build: contended semaphore (limit $SEM_LIMIT), $CLIENTS clients on one name"
drive baton cs --kind sem --limit "$SEM_LIMIT" --names one --wait-ms "$WAIT_MS"
say "this build over HTTP/2: uncontended and contended lock, $CLIENTS clients on $H2_CONNECTIONS connection(s)"
drive baton u2 --kind lock --names each --http 2 --connections "$H2_CONNECTIONS"
drive baton c2 --kind lock --names one --wait-ms "$WAIT_MS" --http 2 --connections "$H2_CONNECTIONS"
if [ "$HAMMER" -gt 0 ]; then
  say "this build: uncontended lock alone, then while $HAMMER clients repeat GET /semaphores/{name} ($HAMMER_HOLDERS holders) and GET /locks ($HAMMER_LOCKS held)"
  # Alone just before, on the same instance: what the hammered run is set beside.
  drive baton hq --kind lock --names each
  drive baton hm --kind lock --names each --hammer "$HAMMER" \
    --hammer-holders "$HAMMER_HOLDERS" --hammer-locks "$HAMMER_LOCKS"
fi
stop_baton

# --- Redis Cluster -------------------------------------------------------------
# The uncontended lock load again, on three cluster masters (no replicas), to
# set beside the standalone figure: names spread over the masters by slot.
if [ "$CLUSTER" = 1 ]; then
  say "this build on a Redis Cluster (3 masters): uncontended lock"
  CLUSTER_NODES=()
  for _ in 1 2 3; do
    # A cluster node's bus listens 10000 higher: the port must be at most 55535.
    port=$(free_port)
    while [ "$port" -gt 55535 ]; do port=$(free_port); done
    mkdir -p "$WORK/cluster-$port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --cluster-enabled yes --cluster-config-file nodes.conf --dir "$WORK/cluster-$port" \
      >"$WORK/cluster-$port.log" 2>&1 &
    PIDS+=("$!")
    wait_for_redis "$port"
    CLUSTER_NODES+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${CLUSTER_NODES[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
  for _ in $(seq 100); do
    redis-cli -p "${CLUSTER_NODES[0]#*:}" cluster info | grep -q 'cluster_state:ok' && break
    sleep 0.1
  done
  BATON_PORT=$(free_port)
  BATON_LISTEN=127.0.0.1:$BATON_PORT BATON_REDIS_MODE=cluster \
    BATON_REDIS_URL=$(printf 'redis://%s,' "${CLUSTER_NODES[@]}" | sed 's/,$//') \
    BATON_KEY_PREFIX=bench: "$BATON" >"$WORK/baton-cluster.log" 2>&1 &
  BATON_PID=$!
  PIDS+=("$BATON_PID")
  wait_for_http "http://127.0.0.1:$BATON_PORT/readyz" 30
  "$LOADGEN" run --target "127.0.0.1:$BATON_PORT" --baton-pid "$BATON_PID" --clients "$CLIENTS" \
    --warmup 1 --duration "$DURATION" --windows "$WINDOWS" --label ulc --out "$RESULTS" \
    --kind lock --names each >/dev/null
  stop_baton
fi

# Each on a fresh instance, so that the memory per waiter is not blurred by
# the load before.
idle_run() { # label args...
  local label=$1
  shift
  start_baton "$label" "$BATON"
  "$LOADGEN" idle --target "127.0.0.1:$BATON_PORT" --redis "127.0.0.1:$REDIS_PORT" \
    --baton-pid "$BATON_PID" --waiters "$WAITERS" --hold "$IDLE_SECONDS" \
    --label "$label" --out "$RESULTS" "$@" >/dev/null
  stop_baton
}
say "this build: $WAITERS idle waiters on one held lock for ${IDLE_SECONDS}s, each its own HTTP/1.1 connection"
idle_run idle
for conns in 1 10 100; do
  say "this build: $WAITERS idle waiters over HTTP/2 on $conns connection(s)"
  case $conns in 1) label=i2a ;; 10) label=i2b ;; *) label=i2c ;; esac
  idle_run "$label" --http 2 --connections "$conns"
done

# Other work on the machine shows here (2 CPUs: a load above ~2.5 means a
# busy machine, and slower absolute figures; the ratios are within one run).
echo "meta.load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS"
"$LOADGEN" report "$RESULTS" | tee "$OUT/report.md"
echo >&2
echo "raw figures: $RESULTS" >&2
if [ "${BENCH_REDIS_COST:-1}" = 1 ]; then
  say "Redis's own time per call (scripts/redis_cost.sh, its own redis-server)"
  {
    echo
    echo "## Redis's time per call (scripts/redis_cost.sh)"
    echo
    BENCH_BASELINE=${BASELINE:-fa1f1fc} scripts/redis_cost.sh
  } | tee -a "$OUT/report.md"
fi
if [ "${BENCH_STRICT:-0}" = 1 ] && grep -q '| FAIL' "$OUT/report.md"; then
  exit 1
fi
