#!/usr/bin/env bash
# baton's benchmark, one command on a new machine:
#
#   scripts/bench.sh
#
# Builds release, starts a private redis-server and baton on free loopback
# ports, measures raw Redis running baton's own Redis functions (redis-benchmark,
# FCALL), then drives baton with examples/loadgen.rs and prints one table:
# every figure next to the raw-Redis baseline measured in the same run, and
# PASS/FAIL against the targets. Everything it starts is stopped on exit.
#
# The machine is shared with whatever else runs on it, and interference only
# ever slows a measurement down: each throughput figure is the best of
# BENCH_WINDOWS windows (baton) or of two runs (raw Redis), with the latencies
# and costs of that same window or run.
#
# Knobs (environment): BENCH_CLIENTS (16), BENCH_DURATION (4 s per window),
# BENCH_WINDOWS (2), BENCH_RAW_REQUESTS (100000 per redis-benchmark run),
# BENCH_WAITERS (10000), BENCH_IDLE_SECONDS (10), BENCH_H2_CONNECTIONS (1:
# the connections the HTTP/2 clients share), BENCH_HAMMER (16 clients repeating
# the largest status and listing calls), BENCH_HAMMER_HOLDERS (10000 holders
# of the semaphore they read), BENCH_HAMMER_LOCKS (10000 held locks they list),
# BENCH_STRICT=1 (exit 1 when a target is missed), BENCH_BATON (another baton
# binary to measure, e.g. a build of a branch; default: the one built here),
# BENCH_BASELINE (the commit of the first version, measured beside this build
# for the contended lock: fa1f1fc; "" to skip).
# Results: target/bench/results.env (raw figures) and target/bench/report.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

CLIENTS=${BENCH_CLIENTS:-16}
DURATION=${BENCH_DURATION:-4}
WINDOWS=${BENCH_WINDOWS:-2}
RAW_N=${BENCH_RAW_REQUESTS:-100000}
WAITERS=${BENCH_WAITERS:-10000}
IDLE_SECONDS=${BENCH_IDLE_SECONDS:-10}
H2_CONNECTIONS=${BENCH_H2_CONNECTIONS:-1}
HAMMER=${BENCH_HAMMER:-16}
HAMMER_HOLDERS=${BENCH_HAMMER_HOLDERS:-10000}
HAMMER_LOCKS=${BENCH_HAMMER_LOCKS:-10000}
WAIT_MS=10000
SEM_LIMIT=4

say() { printf '== %s\n' "$*" >&2; }

# --- tools ------------------------------------------------------------------
ensure_redis
command -v redis-benchmark >/dev/null 2>&1 || ensure_packages redis-tools
command -v redis-cli >/dev/null 2>&1 || ensure_packages redis-tools
command -v curl >/dev/null 2>&1 || ensure_packages curl
command -v python3 >/dev/null 2>&1 || ensure_packages python3
command -v cc >/dev/null 2>&1 || ensure_packages gcc

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

# --- build --------------------------------------------------------------------
say "cargo build --release (baton and examples/loadgen)"
cargo build --release --quiet --bin baton --example loadgen
BATON=${BENCH_BATON:-$ROOT/target/release/baton}
LOADGEN=$ROOT/target/release/examples/loadgen

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")
OUT=$ROOT/target/bench
mkdir -p "$OUT"
RESULTS=$OUT/results.env
: >"$RESULTS"

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

# --- Redis ----------------------------------------------------------------------
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
PIDS+=($!)
wait_for_redis "$REDIS_PORT"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
redis_cpu() { rcli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }

{
  echo "meta.date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "meta.commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo '+changes')"
  echo "meta.cpus=$(nproc)"
  echo "meta.cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  echo "meta.redis_version=$(redis-server --version | sed -E 's/.* v=([^ ]+).*/\1/')"
  echo "meta.clients=$CLIENTS"
  echo "meta.duration=$DURATION"
  echo "meta.windows=$WINDOWS"
} >>"$RESULTS"

# --- baseline: raw Redis running baton's scripts ---------------------------------
# redis-benchmark replaces each __rand_int__ with random() % -r. To release
# exactly the leases it acquired, it runs with a random() that counts 0, 1, 2...
# (LD_PRELOAD), so the release run walks the same keys as the acquire run and
# every call on both sides does its full work (a fresh lease, a real release
# with its PUBLISH, received by a subscriber as baton's would be).
cat >"$WORK/seqrand.c" <<'EOF'
long random(void) { static long next; return next++; }
EOF
cc -shared -fPIC -O2 -o "$WORK/seqrand.so" "$WORK/seqrand.c"

raw_run() { # out label clients requests function numkeys args...
  local out=$1 label=$2 clients=$3 n=$4
  shift 4
  LD_PRELOAD=$WORK/seqrand.so redis-benchmark -p "$REDIS_PORT" -c "$clients" -n "$n" \
    -r 1000000000 --csv FCALL "$@" | tail -n 1 |
    awk -F'","' -v l="$label" '{ printf "raw.%s_rps=%s\nraw.%s_p50_ms=%s\nraw.%s_p99_ms=%s\n", l, $2, l, $5, l, $7 }' \
      >>"$out"
}

# Acquires n leases, then releases them: with $CLIENTS clients (throughput,
# Redis CPU per cycle), then with one client (a hand-off done by Redis alone:
# one release, then one acquire, back to back). Twice; the better run counts.
raw_pair() { # kind requests acquire_args_name release_args_name
  local kind=$1 n=$2 cpu0 cpu1 sub attempt out best=0 rate best_out=
  local -n acq=$3 rel=$4
  for attempt in 1 2; do
    out=$WORK/raw-$kind-$attempt.env
    : >"$out"
    rcli flushall >/dev/null
    redis-cli -p "$REDIS_PORT" subscribe bench:events >/dev/null &
    sub=$!
    PIDS+=("$sub")
    sleep 0.2
    cpu0=$(redis_cpu)
    raw_run "$out" "${kind}_acquire" "$CLIENTS" "$n" "${acq[@]}"
    raw_run "$out" "${kind}_release" "$CLIENTS" "$n" "${rel[@]}"
    cpu1=$(redis_cpu)
    # Two redis-benchmark handshakes are in there too; over $n cycles they vanish.
    awk -v a="$cpu0" -v b="$cpu1" -v n="$n" -v k="$kind" \
      'BEGIN { printf "raw.%s_redis_cpu_us_per_cycle=%.3f\n", k, (b - a) * 1e6 / n }' >>"$out"
    rcli flushall >/dev/null
    cpu0=$(redis_cpu)
    raw_run "$out" "${kind}_c1_acquire" 1 "$((n / 20))" "${acq[@]}"
    raw_run "$out" "${kind}_c1_release" 1 "$((n / 20))" "${rel[@]}"
    cpu1=$(redis_cpu)
    awk -v a="$cpu0" -v b="$cpu1" -v n="$((n / 20))" -v k="$kind" \
      'BEGIN { printf "raw.%s_c1_redis_cpu_us_per_cycle=%.3f\n", k, (b - a) * 1e6 / n }' >>"$out"
    kill "$sub" 2>/dev/null || true
    wait "$sub" 2>/dev/null || true
    rate=$(awk -F= -v k="$kind" '$1 == "raw." k "_acquire_rps" { a = $2 } $1 == "raw." k "_release_rps" { r = $2 }
      END { if (a > 0 && r > 0) printf "%.0f", 1 / (1 / a + 1 / r); else print 0 }' "$out")
    if [ "$rate" -gt "$best" ]; then
      best=$rate
      best_out=$out
    fi
  done
  cat "$best_out" >>"$RESULTS"
}

say "raw Redis: baton's lock functions via redis-benchmark FCALL ($RAW_N acquires, then $RAW_N releases)"
# baton's library of operations, loaded as the service loads it.
"$LOADGEN" library >"$WORK/library.lua"
rcli -x function load replace <"$WORK/library.lua" >/dev/null
ACQ=$("$LOADGEN" function acquire)
REL=$("$LOADGEN" function release)
# The name's leases and owners keys and the lease id take the 1st, 2nd and 3rd
# number of each call, in the acquire as in the release; the line's keys are
# shared. Then the arguments every operation takes (src/engine/functions/line.lua).
line_keys() { # kind tag
  printf '%s\n' 6 "bench:{$2:__rand_int__}:leases" "bench:{$2:__rand_int__}:owners" \
    "bench:{$2:q}:queue" "bench:{$2:q}:byinst" "bench:{$2:q}:instances" "bench:{$2:q}:notes" \
    "$1" bench "bench:{$2:bench}:events" PUBLISH bench:events bench-instance
}
# A waiter as the line keeps it: id|tag|instance|ttl_ms|limit|newest|owner.
waiter() { printf '__rand_int__|0|bench-instance|30000|%s|0|' "$1"; }
mapfile -t LOCK_KEYS < <(line_keys lock lock)
# shellcheck disable=SC2034  # used through namerefs
lock_acquire_args=("$ACQ" "${LOCK_KEYS[@]}" "$(waiter 1)" 0 0)
# shellcheck disable=SC2034
lock_release_args=("$REL" "${LOCK_KEYS[@]}" '__rand_int__' release '')
raw_pair lock "$RAW_N" lock_acquire_args lock_release_args

say "raw Redis: baton's semaphore functions (limit $SEM_LIMIT, each acquire on its own name)"
mapfile -t SEM_KEYS < <(line_keys semaphore sem)
# shellcheck disable=SC2034
sem_acquire_args=("$ACQ" "${SEM_KEYS[@]}" "$(waiter "$SEM_LIMIT")" 0 0)
# shellcheck disable=SC2034
sem_release_args=("$REL" "${SEM_KEYS[@]}" '__rand_int__' release '')
raw_pair sem "$((RAW_N / 2))" sem_acquire_args sem_release_args
rcli flushall >/dev/null

# --- baton ------------------------------------------------------------------------
BATON_PID=
BATON_PORT=
start_baton() { # log-name [binary]
  local binary=${2:-$BATON}
  BATON_PORT=$(free_port)
  # The idle run holds $WAITERS connections plus the load generator's own:
  # above the default cap of 10,000 connections.
  BATON_LISTEN=127.0.0.1:$BATON_PORT BATON_REDIS_URL=redis://127.0.0.1:$REDIS_PORT \
    BATON_KEY_PREFIX=bench: BATON_MAX_CONNECTIONS=$((WAITERS + 1024)) \
    "$binary" >"$WORK/baton-$1.log" 2>&1 &
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
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

loadgen() { # label args...
  local label=$1
  shift
  "$LOADGEN" run --target "127.0.0.1:$BATON_PORT" --redis "127.0.0.1:$REDIS_PORT" \
    --baton-pid "$BATON_PID" --clients "$CLIENTS" --warmup 1 --duration "$DURATION" --windows "$WINDOWS" \
    --label "$label" --out "$RESULTS" "$@" >/dev/null
}

start_baton main
echo "rest.baton_rss_kb=$(rss_kb "$BATON_PID")" >>"$RESULTS"

say "baton: uncontended lock, $CLIENTS clients each on its own name ($WINDOWS x ${DURATION}s)"
loadgen ul --kind lock --names each
say "baton: uncontended semaphore (limit $SEM_LIMIT), $CLIENTS clients each on its own name"
loadgen us --kind sem --limit "$SEM_LIMIT" --names each
say "baton: contended lock, $CLIENTS clients on one name, wait_ms $WAIT_MS"
loadgen cl --kind lock --names one --wait-ms "$WAIT_MS"
say "baton: contended semaphore (limit $SEM_LIMIT), $CLIENTS clients on one name"
loadgen cs --kind sem --limit "$SEM_LIMIT" --names one --wait-ms "$WAIT_MS"
say "baton over HTTP/2: uncontended lock, $CLIENTS clients on $H2_CONNECTIONS connection(s)"
loadgen u2 --kind lock --names each --http 2 --connections "$H2_CONNECTIONS"
say "baton over HTTP/2: contended lock, $CLIENTS clients on $H2_CONNECTIONS connection(s)"
loadgen c2 --kind lock --names one --wait-ms "$WAIT_MS" --http 2 --connections "$H2_CONNECTIONS"
if [ "$HAMMER" -gt 0 ]; then
  say "baton: uncontended lock while $HAMMER clients repeat GET /semaphores/{name} ($HAMMER_HOLDERS holders) and GET /locks ($HAMMER_LOCKS held)"
  loadgen hm --kind lock --names each --hammer "$HAMMER" \
    --hammer-holders "$HAMMER_HOLDERS" --hammer-locks "$HAMMER_LOCKS"
fi
stop_baton
rcli flushall >/dev/null

# --- the contended lock beside the first version ----------------------------------
# Issue 10's targets for a contended hand-off (hand-offs/s, Redis CPU) are
# against the first version: built here from the repository's history (once;
# kept in target/bench-baseline), measured beside this build on the same
# Redis, twice each, alternately. BENCH_BASELINE="" skips it.
BASELINE=${BENCH_BASELINE-fa1f1fc}
if [ -n "$BASELINE" ] && git rev-parse -q --verify "$BASELINE^{commit}" >/dev/null 2>&1; then
  BASE_BIN=$ROOT/target/bench-baseline/release/baton
  if [ ! -x "$BASE_BIN" ] || [ "$(cat "$ROOT/target/bench-baseline/commit" 2>/dev/null)" != "$BASELINE" ]; then
    say "building the first version ($BASELINE) to measure beside this build"
    git worktree add --detach --quiet "$WORK/baseline" "$BASELINE"
    (cd "$WORK/baseline" && CARGO_TARGET_DIR=$ROOT/target/bench-baseline cargo build --release --quiet --bin baton)
    git worktree remove --force "$WORK/baseline"
    echo "$BASELINE" >"$ROOT/target/bench-baseline/commit"
  fi
  echo "meta.baseline=$BASELINE" >>"$RESULTS"
  for round in 1 2; do
    say "contended lock beside the first version, round $round of 2"
    start_baton "first-$round" "$BASE_BIN"
    loadgen "v$round" --kind lock --names one --wait-ms "$WAIT_MS"
    stop_baton
    rcli flushall >/dev/null
    start_baton "now-$round"
    loadgen "n$round" --kind lock --names one --wait-ms "$WAIT_MS"
    stop_baton
    rcli flushall >/dev/null
  done
fi

# --- Redis Cluster -------------------------------------------------------------
# The uncontended lock load again, on three cluster masters (no replicas), to
# set beside the standalone figure: names spread over the masters by slot.
say "baton on a Redis Cluster (3 masters): uncontended lock, $CLIENTS clients each on its own name"
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

# Each on a fresh instance, so that the memory per waiter is not blurred by
# the load before.
idle_run() { # label args...
  local label=$1
  shift
  start_baton "$label"
  "$LOADGEN" idle --target "127.0.0.1:$BATON_PORT" --redis "127.0.0.1:$REDIS_PORT" \
    --baton-pid "$BATON_PID" --waiters "$WAITERS" --hold "$IDLE_SECONDS" \
    --label "$label" --out "$RESULTS" "$@" >/dev/null
  stop_baton
  rcli flushall >/dev/null
}
say "baton: $WAITERS idle waiters on one held lock for ${IDLE_SECONDS}s, each its own HTTP/1.1 connection"
idle_run idle
for conns in 1 10 100; do
  say "baton: $WAITERS idle waiters over HTTP/2 on $conns connection(s)"
  case $conns in 1) label=i2a ;; 10) label=i2b ;; *) label=i2c ;; esac
  idle_run "$label" --http 2 --connections "$conns"
done

"$LOADGEN" report "$RESULTS" | tee "$OUT/report.md"
awk -F= '$1 == "ul.cycles_per_s" { s = $2 } $1 == "ulc.cycles_per_s" { c = $2 }
  END {
    if (s > 0 && c > 0) {
      printf "\nRedis Cluster, 3 masters on this machine: uncontended lock %.0f acquire+release cycles/s (standalone: %.0f, %.2f x).\n", c, s, c / s
      print "On 2 cores, baton, the load generator and the Redis servers share the same two CPUs:"
      print "the cluster row is bound by CPU, not by Redis (each master is mostly idle), and"
      print "routing by slot costs a little; a cluster adds capacity across machines, not on one."
    }
  }' "$RESULTS" | tee -a "$OUT/report.md"
echo >&2
echo "raw figures: $RESULTS" >&2
if [ "${BENCH_STRICT:-0}" = 1 ] && grep -q '| FAIL' "$OUT/report.md"; then
  exit 1
fi
