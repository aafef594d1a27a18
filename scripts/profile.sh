#!/usr/bin/env bash
# Where baton's CPU per uncontended lock cycle goes, layer by layer, beside the
# same profile of the floors (examples/floor.rs), in one command:
#
#   scripts/profile.sh                 # baton and the Redis-backed floor
#   scripts/profile.sh baton rfloor floor
#
# Builds release with line tables and symbols (CARGO_PROFILE_RELEASE_DEBUG=
# line-tables-only, STRIP=false, into target/profile: scripts/bench.sh's
# release build stays as it is), starts a private redis-server, and drives
# each server with scripts/bench.sh's uncontended lock load
# (examples/loadgen.rs, 16 clients, each on its own name), in turn:
#   1. at full speed: user and kernel CPU per cycle over PROFILE_PLAIN_CYCLES
#      cycles (/proc utime and stime, read before and after), three times,
#      the median kept;
#   2. with perf, when it works here (separate passes, as perf slows the
#      server): system calls per cycle (perf stat of the syscalls
#      tracepoints) and the kernel's time by system call (perf record -e
#      cpu-clock -g: the frame above do_syscall_64 of each kernel sample);
#   3. under callgrind: the instructions of PROFILE_CYCLES cycles (counters
#      zeroed after a warm-up, dumped after the cycles, by callgrind_control),
#      exact and the same on a busy machine as on a quiet one, with the
#      system calls each function made (--collect-systime).
# scripts/profile_layers.py then gives each instruction a layer (its source
# file, which sees through inlining; else its function's crate and module;
# else its callers': malloc, free and memcpy count for whoever called them)
# and prints the user CPU by layer (the layer's share of the instructions
# times the user CPU per cycle), the kernel CPU by system call, the largest
# modules of each layer, and which layer makes each system call.
# What it cannot see: perf's cycle counters are not available on these VMs,
# so a layer's time is its share of instructions (a layer that misses caches
# more costs more time than its share says); under valgrind the server runs
# far slower than its clients, so more requests arrive per wake-up and the
# system calls per cycle under callgrind are fewer than at full speed (perf
# stat's count is the full-speed one).
#
# Knobs: PROFILE_CYCLES (2000 under callgrind), PROFILE_PLAIN_CYCLES (20000
# at full speed), PROFILE_CLIENTS (16), PROFILE_PERF (1; 0 skips perf).
# Output: target/profile/report.md; each server's measurements in
# target/profile/<server>/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

CYCLES=${PROFILE_CYCLES:-2000}
PLAIN_CYCLES=${PROFILE_PLAIN_CYCLES:-20000}
CLIENTS=${PROFILE_CLIENTS:-16}
PERF=${PROFILE_PERF:-1}
SERVERS=("$@")
[ ${#SERVERS[@]} -gt 0 ] || SERVERS=(baton rfloor)

say() { printf '== %s\n' "$*" >&2; }

ensure_redis
command -v valgrind >/dev/null 2>&1 || ensure_packages valgrind
command -v curl >/dev/null 2>&1 || ensure_packages curl

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-profile.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "cargo build --release with line tables, into target/profile"
CARGO_TARGET_DIR=$ROOT/target/profile CARGO_PROFILE_RELEASE_STRIP=false \
  CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
  cargo build --release --quiet --bin baton --example floor --example loadgen
BIN=$ROOT/target/profile/release
OUT=$ROOT/target/profile
mkdir -p "$OUT"

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
PIDS+=($!)
wait_for_redis "$REDIS_PORT"

SERVER_PID=
SERVER_PORT=
start() { # server [valgrind args...]
  local server=$1 cmd
  shift
  case $server in
    baton) cmd=("$BIN/baton") ;;
    rfloor) cmd=("$BIN/examples/floor" redis) ;;
    floor) cmd=("$BIN/examples/floor" memory) ;;
    *) echo "unknown server $server (baton, rfloor or floor)" >&2; exit 2 ;;
  esac
  SERVER_PORT=$(free_port)
  BATON_LISTEN=127.0.0.1:$SERVER_PORT BATON_REDIS_URL=redis://127.0.0.1:$REDIS_PORT \
    BATON_KEY_PREFIX=profile: "$@" "${cmd[@]}" >>"$WORK/$server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_for_http "http://127.0.0.1:$SERVER_PORT/readyz" 120
}
stop() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
}
load() { # cycles
  "$BIN/examples/loadgen" run --target "127.0.0.1:$SERVER_PORT" --kind lock --names each \
    --clients "$CLIENTS" --warmup 0 --duration 300 --max-ops "$1" --label run
}
figure() { # key (of loadgen's output on stdin)
  sed -n "s/^run\.$1=//p"
}
ticks() { # user or kernel CPU ticks of the server so far
  awk -v f="$1" '{ sub(/^.*\) /, ""); print (f == "user" ? $12 : $13) }' "/proc/$SERVER_PID/stat"
}
if [ "$PERF" = 1 ] && ! perf stat -e syscalls:sys_enter_write -o /dev/null true 2>/dev/null; then
  say "perf cannot count system calls here: the kernel's time by system call is left out"
  PERF=0
fi

HZ=$(getconf CLK_TCK)
ARGS=()
for server in "${SERVERS[@]}"; do
  dir=$OUT/$server
  rm -rf "$dir"
  mkdir -p "$dir"
  say "$server: $PLAIN_CYCLES cycles at full speed ($CLIENTS clients)"
  start "$server"
  load 2000 >/dev/null
  # Three times; the one of median CPU per cycle counts (the machine is shared).
  runs=()
  for _ in 1 2 3; do
    u0=$(ticks user) s0=$(ticks kernel)
    done_cycles=$(load "$PLAIN_CYCLES" | figure cycles)
    u1=$(ticks user) s1=$(ticks kernel)
    runs+=("$((u1 - u0)) $((s1 - s0)) $done_cycles")
  done
  printf '%s\n' "${runs[@]}" | python3 -c "
import sys
runs = sorted((u + s, u, s, c) for u, s, c in (map(float, l.split()) for l in sys.stdin))
_, u, s, c = runs[len(runs) // 2]
print(f'user_us={u / $HZ * 1e6 / c:.2f}')
print(f'sys_us={s / $HZ * 1e6 / c:.2f}')
print('full_speed_us=' + ' / '.join(f'{t / $HZ * 1e6 / c:.1f}' for t, _, _, c in runs))
" >"$dir/figures.env"
  if [ "$PERF" = 1 ]; then
    say "$server: system calls (perf stat) and the kernel's time (perf record)"
    perf stat -x, -e 'syscalls:sys_enter_*' -o "$dir/syscalls.csv" -p "$SERVER_PID" &
    perf_pid=$!
    sleep 1 # attached before the load starts
    echo "perf_cycles=$(load "$PLAIN_CYCLES" | figure cycles)" >>"$dir/figures.env"
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    perf record -q -e cpu-clock -F 2000 -g -o "$dir/perf.data" -p "$SERVER_PID" 2>/dev/null &
    perf_pid=$!
    sleep 1
    load "$PLAIN_CYCLES" >/dev/null
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    perf script -i "$dir/perf.data" -F ip,sym >"$dir/kernel.txt" 2>/dev/null
    rm -f "$dir/perf.data"
  fi
  stop

  say "$server: $CYCLES cycles under callgrind"
  start "$server" valgrind --tool=callgrind --collect-systime=nsec \
    --compress-strings=no --compress-pos=no --dump-instr=no \
    --callgrind-out-file="$dir/callgrind.exit"
  load 200 >/dev/null
  callgrind_control -z "$SERVER_PID" >/dev/null
  result=$(load "$CYCLES")
  callgrind_control -d "$SERVER_PID" >/dev/null
  stop
  errors=$(figure errors <<<"$result")
  [ "$errors" = 0 ] || say "$server: $errors requests failed under callgrind"
  echo "cycles=$(figure cycles <<<"$result")" >>"$dir/figures.env"
  # The dump callgrind_control asked for is the first numbered one.
  mv "$dir/callgrind.exit.1" "$dir/callgrind.out"
  rm -f "$dir"/callgrind.exit*
  case $server in
    baton) label=baton ;;
    rfloor) label="Redis-backed floor" ;;
    floor) label="HTTP floor" ;;
  esac
  ARGS+=("$label=$dir")
done

{
  echo "Profile of one uncontended lock cycle, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD) (src/ last changed in $(git log -1 --format=%h -- src Cargo.lock))$(git diff --quiet HEAD -- src 2>/dev/null || echo ', with uncommitted changes'), $CLIENTS clients; $CYCLES cycles under callgrind, $PLAIN_CYCLES at full speed (CPU per cycle of each of three runs: see figures.env); load average $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  python3 scripts/profile_layers.py "${ARGS[@]}"
} | tee "$OUT/report.md"
