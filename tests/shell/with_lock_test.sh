#!/usr/bin/env bash
# Tests of `baton run` against real baton instances and Redis (tests/shell/lib.sh):
# every check runs twice, once with the binary itself and once through
# scripts/with-lock, the launcher that fetches it from the service. Then what
# is checked once: the launcher's own failures, acquire and release in two
# steps, GET /baton, completions and the manual page. Time margins are
# generous: the machine may be shared.
# The COMMANDs below are sh -c scripts in single quotes, expanded by sh:
# shellcheck disable=SC2016
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

LAUNCHER="$ROOT/scripts/with-lock"
start_stack
B_URL=$BATON_URL # instance B: the one the stack started
# The launcher's cache of binaries, for this test only.
export BATON_CACHE_DIR="$TEST_TMP/cache"

# Instance A: a second baton on the same Redis and key prefix, with a small
# maximum wait (for the max_wait_ms test).
A_PORT=$(free_port)
BATON_LISTEN="127.0.0.1:$A_PORT" BATON_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
  BATON_KEY_PREFIX="shell-test:" BATON_MAX_WAIT_MS=3000 RUST_LOG=warn \
  "$BATON_BIN" >"$TEST_TMP/baton-a.log" 2>&1 &
A_PID=$!
TRACKED_PIDS+=("$A_PID")
A_URL="http://127.0.0.1:$A_PORT"
wait_for_http "$A_URL/healthz" 30

now_ms() { echo $(($(date +%s%N) / 1000000)); }
wait_for_line() { # FILE SECONDS REGEX
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    grep -q -- "$3" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
wait_pid() { # PID SECONDS: sets RC (or "timeout", after killing it)
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    if ! kill -0 "$1" 2>/dev/null; then
      wait "$1"
      RC=$?
      return 0
    fi
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  RC=timeout
  return 1
}
# PIDs of processes whose environment has WLMARK=$1 (a wrapper and its children).
marked() { grep -lzx -- "WLMARK=$1" /proc/[0-9]*/environ 2>/dev/null | tr -dc '0-9\n' | tr '\n' ' '; }
fence_exists() { redis-cli -p "$REDIS_PORT" exists "shell-test:{lock:$1}:owners"; }
LABEL=""
check() { if eval "$2"; then pass "$LABEL$1"; else fail "$LABEL$1: $3"; fi; }

# Every check of `baton run`, through the command WL... (the binary or the launcher).
suite() { # LABEL WL...
  LABEL="[$1] "
  T="$TEST_TMP/wl/${1// /-}"
  shift
  WL=("$@")
  mkdir -p "$T"

  out=$("${WL[@]}" --help 2>&1)
  check "--help prints usage, the exit statuses and the stop margin" \
    '[[ $out == *"Usage: baton run"* && $out == *"79 "*superseded* && $out == *"--grace plus one refresh round trip"* ]]' "$out"
  "${WL[@]}" >/dev/null 2>&1; r1=$?
  "${WL[@]}" --ttl soon x -- true >/dev/null 2>&1; r2=$?
  "${WL[@]}" --ttl 3 --grace 5 x -- true >/dev/null 2>&1; r3=$?
  "${WL[@]}" --permits 2 x -- true >/dev/null 2>&1; r4=$?
  check "bad usage exits 64 (no NAME, bad duration, --grace that cannot fit --ttl, --permits without --limit)" \
    '[ "$r1$r2$r3$r4" = 64646464 ]' "statuses $r1 $r2 $r3 $r4"

  "${WL[@]}" --wait 4 pre-cmd -- /nonexistent/cmd 2>"$T/pre1.err"; r1=$?
  check "a missing COMMAND exits 127 at once and acquires nothing" \
    '[ "$r1 $(fence_exists pre-cmd)" = "127 0" ]' "status $r1; $(cat "$T/pre1.err")"

  "${WL[@]}" -q seq -- sh -c 'echo "$BATON_FENCING_TOKEN" >>"$1"' sh "$T/seq"
  "${WL[@]}" -q seq -- sh -c 'echo "$BATON_FENCING_TOKEN" >>"$1"' sh "$T/seq"
  t1=$(sed -n 1p "$T/seq") t2=$(sed -n 2p "$T/seq")
  check "two jobs one after the other: fencing tokens increase" \
    '[[ $t1 =~ ^[0-9]+$ && $t2 =~ ^[0-9]+$ ]] && [ "$t2" -gt "$t1" ]' "tokens '$t1' '$t2'"

  out=$("${WL[@]}" shell -c 'echo "hi from $BATON_LOCK_NAME" && exit 3' 2>&1); rc=$?
  check "-c runs a shell string (its status comes back)" \
    '[ "$rc" = 3 ] && [[ $out == *"hi from shell"* ]]' "status $rc: $out"

  "${WL[@]}" --ttl 3s short -- sleep 4 2>"$T/ttl3.err"; r1=$?
  "${WL[@]}" --ttl 10s short -- true 2>"$T/ttl10.err"; r2=$?
  check "--ttl 3s (refreshed for a longer COMMAND) and --ttl 10s work with the default grace" \
    '[ "$r1$r2" = 00 ]' "statuses $r1 $r2; $(cat "$T/ttl3.err" "$T/ttl10.err")"

  "${WL[@]}" --wait 0 nest -- sh -c 'touch "$1/outer.ran"; shift; exec "$@"' sh "$T" \
    "${WL[@]}" --wait 0 nest -- touch "$T/inner.ran" 2>"$T/nest.err"
  rc=$?
  check "a nested run of the same NAME runs at once under the held lease" \
    '[ "$rc" = 0 ] && [ -e "$T/outer.ran" ] && [ -e "$T/inner.ran" ] && grep -q "held already" "$T/nest.err"' \
    "status $rc; $(cat "$T/nest.err")"

  # --- names, status, environment ------------------------------------------------

  name='review/app 1 é:{x}*'
  out=$("${WL[@]}" --owner tester "$name" -- sh -c \
    'printf "%s\n%s\n%s\n" "$BATON_LOCK_NAME" "$BATON_FENCING_TOKEN" "$BATON_LEASE_ID" >"$1"; exit 42' \
    sh "$T/env" 2>&1)
  rc=$?
  got_name=$(sed -n 1p "$T/env") token=$(sed -n 2p "$T/env") id=$(sed -n 3p "$T/env")
  check "COMMAND's status comes back (42)" '[ "$rc" = 42 ]' "status $rc: $out"
  check "a name with a slash, a space and Unicode reaches COMMAND and the service as it is" \
    '[ "$got_name" = "$name" ] && [[ $token =~ ^[0-9]+$ ]] && [[ $id =~ ^[0-9a-f-]{36}$ ]] && [[ $out == *"acquired lock '"'"'$name'"'"'"* ]]' \
    "name '$got_name' token '$token' id '$id'; $out"
  check "the lease id is never printed" '[ -n "$id" ] && [[ $out != *"$id"* ]]' "$out"
  held=$(curl -sS "$BATON_URL/locks/review%2Fapp%201%20%C3%A9%3A%7Bx%7D%2A")
  check "the lock is released when COMMAND exits" '[[ $held == *"\"held\":false"* ]]' "$held"

  # --- mutual exclusion and semaphores -----------------------------------------------

  excl='mkdir "$1/in" 2>/dev/null || echo overlap >>"$1/bad"; echo x >>"$1/ran"; sleep 1; rmdir "$1/in"'
  mkdir -p "$T/excl"
  pids=()
  for i in 1 2 3; do "${WL[@]}" -q --wait 1m excl -- sh -c "$excl" sh "$T/excl" & pids+=($!); done
  st=""
  for p in "${pids[@]}"; do wait_pid "$p" 30; st+=" $RC"; done
  check "three wrappers on one lock never run their commands at once" \
    '[ "$st" = " 0 0 0" ] && [ "$(wc -l <"$T/excl/ran")" = 3 ] && [ ! -e "$T/excl/bad" ]' \
    "statuses$st, overlaps: $(cat "$T/excl/bad" 2>/dev/null)"

  sem='mkdir "$1/run/$2"; ls "$1/run" | wc -l >>"$1/counts"; sleep 1; rmdir "$1/run/$2"'
  mkdir -p "$T/sem/run"
  pids=()
  for i in 1 2 3 4; do "${WL[@]}" -q --limit 2 --wait 1m 'builders/x86' -- sh -c "$sem" sh "$T/sem" "$i" & pids+=($!); done
  st=""
  for p in "${pids[@]}"; do wait_pid "$p" 30; st+=" $RC"; done
  most=$(sort -n "$T/sem/counts" | tail -n 1)
  check "--limit 2 with four wrappers runs two at once, never more" \
    '[ "$st" = " 0 0 0 0" ] && [ "$most" = 2 ]' "statuses$st, most at once: $most"

  # --- the whole process group keeps the lease -----------------------------------

  start=$(now_ms)
  WLMARK="bg" "${WL[@]}" --owner bg-holder bg-child -- bash -c 'sleep 3 & exit 0' 2>"$T/bg.err" &
  bg=$!
  wait_for_line "$T/bg.err" 10 "holding lock 'bg-child' until its other processes"
  "${WL[@]}" --wait 0 bg-child -- true 2>"$T/bg2.err"; r_busy=$?
  wait_pid "$bg" 20
  took=$(($(now_ms) - start))
  check "a background child keeps the lease: the lock is held until it has exited" \
    '[ "$r_busy" = 75 ] && [ "$RC" = 0 ] && [ "$took" -ge 2900 ] && [ -z "$(marked bg)" ]' \
    "busy check $r_busy, status $RC after $took ms; $(cat "$T/bg.err" "$T/bg2.err")"

  # --- signals --------------------------------------------------------------------

  WLMARK=sig "${WL[@]}" --owner sig-holder --grace 2 sig -- bash -c 'sleep 60 & sleep 60' 2>"$T/sig.err" &
  h=$!
  wait_for_line "$T/sig.err" 10 "acquired lock 'sig'"
  WLMARK=sigw "${WL[@]}" --wait 1m sig -- true 2>"$T/sigw.err" &
  w=$!
  wait_for_line "$T/sigw.err" 10 "waiting for lock 'sig'"
  start=$(now_ms)
  kill -TERM "$w"
  wait_pid "$w" 10
  wrc=$RC wtook=$(($(now_ms) - start))
  start=$(now_ms)
  kill -TERM "$h"
  wait_pid "$h" 10
  took=$(($(now_ms) - start))
  sleep 0.3
  check "SIGTERM while waiting gives up at once (143), leaving no process" \
    '[ "$wrc" = 143 ] && [ "$wtook" -lt 3000 ] && [ -z "$(marked sigw)" ]' "status $wrc after $wtook ms; $(cat "$T/sigw.err")"
  check "SIGTERM while running stops the whole group, releases, exits 143" \
    '[ "$RC" = 143 ] && [ "$took" -lt 4000 ] && [ -z "$(marked sig)" ] && "${WL[@]}" -q --wait 0 sig -- true' \
    "status $RC after $took ms, left: '$(marked sig)'; $(cat "$T/sig.err")"

  # A CI runner's hard timeout: SIGKILL to the whole process group of the
  # wrapper. Its guard stops COMMAND's group (TERM ignored: SIGKILL after
  # --grace) and releases the lease long before its ttl (60 s) runs out.
  WLMARK=killed setsid "${WL[@]}" --ttl 60 --grace 1 killed -- bash -c 'trap "" TERM; sleep 120 & sleep 120' 2>"$T/k.err" &
  k=$!
  wait_for_line "$T/k.err" 10 "acquired lock 'killed'"
  sleep 0.5
  kill -KILL -- "-$k"
  wait "$k" 2>/dev/null
  start=$(now_ms)
  for _ in $(seq 450); do
    [ -z "$(marked killed)" ] && curl -sS "$BATON_URL/locks/killed" | grep -q '"held":false' && break
    sleep 0.1
  done
  took=$(($(now_ms) - start))
  left=$(marked killed)
  check "SIGKILL of the wrapper's process group: COMMAND's group is stopped and the lease released (not left to its ttl)" \
    '[ -z "$left" ] && [ "$took" -lt 45000 ] && grep -q "guard: COMMAND.s group has ended; the lease is released" "$T/k.err"' \
    "left: '$left' after $took ms; $(cat "$T/k.err")"
  # shellcheck disable=SC2086 # one pid a word
  [ -z "$left" ] || kill -KILL $left 2>/dev/null

  # --- a lease taken away ------------------------------------------------------------

  WLMARK=taken "${WL[@]}" --ttl 3 --grace 1 taken/x -- bash -c 'trap "" TERM; sleep 60 & sleep 60' 2>"$T/t.err" &
  w=$!
  wait_for_line "$T/t.err" 10 "acquired lock 'taken/x'"
  code=$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$BATON_URL/locks/taken%2Fx")
  start=$(now_ms)
  wait_pid "$w" 20
  took=$(($(now_ms) - start))
  check "a force-released lease stops the group (SIGKILL after --grace) and exits 76" \
    '[ "$code" = 204 ] && [ "$RC" = 76 ] && [ "$took" -lt 4500 ] && [ -z "$(marked taken)" ] && grep -q "no longer has it" "$T/t.err"' \
    "force-release $code, status $RC after $took ms; $(cat "$T/t.err")"

  # --- mutual exclusion end to end: instance A frozen, a competitor on B ---------------

  ticks="$T/ticks"
  WLMARK=frozen "${WL[@]}" --url "$A_URL" --ttl 6 --grace 1 --owner frozen frozen -- bash -c '
    tick() { trap "" TERM; while :; do date +%s%N >>"$1"; sleep 0.05; done; }
    tick "$1" & tick "$1"' sh "$ticks" 2>"$T/f.err" &
  w=$!
  if wait_for_line "$T/f.err" 10 "acquired lock 'frozen'"; then
    kill -STOP "$A_PID"
    got=$(curl -sS -o "$T/f.body" -w '%{http_code}' -X POST "$B_URL/locks/frozen" -d '{"wait_ms": 20000, "owner": "competitor"}')
    granted_ns=$(date +%s%N)
    wait_pid "$w" 20
    kill -CONT "$A_PID"
    last_ns=$(sort -n "$ticks" | tail -n 1)
    check "A frozen: the command has fully ended before the competitor's 201 on B, and with-lock exits 76" \
      '[ "$got" = 201 ] && [ "$RC" = 76 ] && [ "$last_ns" -lt "$granted_ns" ] && [ -z "$(marked frozen)" ]' \
      "competitor $got, status $RC, last tick $(((granted_ns - last_ns) / 1000000)) ms before the 201; $(cat "$T/f.err")"
    echo "    the command ended $(((granted_ns - last_ns) / 1000000)) ms before the competitor's 201"
  else
    fail "the frozen-instance holder never acquired: $(cat "$T/f.err")"
    kill "$w" 2>/dev/null
  fi

  # --- waiting: the place in line, max_wait_ms --------------------------------------------

  "${WL[@]}" --owner line-holder line -- sleep 7 2>"$T/l0.err" &
  h=$!
  wait_for_line "$T/l0.err" 10 "acquired"
  "${WL[@]}" --owner line-1 --wait 1m line -- true 2>"$T/l1.err" &
  w1=$!
  sleep 0.5
  "${WL[@]}" --owner line-2 --wait 1m line -- true 2>"$T/l2.err" &
  w2=$!
  wait_pid "$w2" 30
  wait_pid "$w1" 30
  wait_pid "$h" 10
  check "while waiting it prints its place in line and the holder" \
      'grep -q "waiting for lock '"'"'line'"'"': place 2 of 2 in line; held by line-holder (expires in" "$T/l2.err" && grep -q "place 1 of 2 in line" "$T/l1.err"' \
    "$(cat "$T/l1.err" "$T/l2.err")"

  # Instance A allows waits of 3 s: a --wait of 8 s is refused (400 with
  # max_wait_ms) unless it is waited in steps of 3 s, until the holder (5 s) is done.
  "${WL[@]}" --url "$A_URL" steps -- sleep 5 2>/dev/null &
  h=$!
  sleep 0.5
  "${WL[@]}" --url "$A_URL" --wait 8 steps -- true 2>"$T/steps.err"
  rc=$?
  wait_pid "$h" 10
  check "a wait over the service's maximum is done in steps of its max_wait_ms" \
    '[ "$rc" = 0 ]' "status $rc; $(cat "$T/steps.err")"

  # --- newest wins -----------------------------------------------------------------------

  "${WL[@]}" --owner deploy-0 deploy/prod -- sleep 4 2>"$T/n0.err" &
  h=$!
  wait_for_line "$T/n0.err" 10 "acquired"
  "${WL[@]}" --newest-wins --owner deploy-1 --wait 1m deploy/prod -- touch "$T/n1.ran" 2>"$T/n1.err" &
  n1=$!
  sleep 1
  "${WL[@]}" --newest-wins --owner deploy-2 --wait 1m deploy/prod -- touch "$T/n2.ran" 2>"$T/n2.err" &
  n2=$!
  wait_pid "$n1" 30
  r1=$RC
  wait_pid "$n2" 30
  r2=$RC
  wait_pid "$h" 10
  check "--newest-wins: an older waiter is superseded (exit 79, COMMAND not run), the newest runs" \
    '[ "$r1" = 79 ] && [ "$r2" = 0 ] && [ ! -e "$T/n1.ran" ] && [ -e "$T/n2.ran" ] && grep -q "superseded.*deploy-2" "$T/n1.err"' \
    "statuses $r1 $r2; $(cat "$T/n1.err" "$T/n2.err")"

  # --- owner defaults ----------------------------------------------------------------------

  owner_in() { # ENV...: the owner shown in status while with-lock holds "owner"
    env -u GITHUB_ACTIONS -u GITLAB_CI -u JENKINS_URL -u BUILDKITE "$@" "${WL[@]}" -q owner -- \
      sh -c 'curl -sS "$BATON_URL/locks/owner"' | sed -n 's/.*"owner":"\([^"]*\)".*/\1/p'
  }
  gh=$(owner_in GITHUB_ACTIONS=true GITHUB_SERVER_URL=https://github.com GITHUB_REPOSITORY=acme/shop GITHUB_RUN_ID=42)
  gl=$(owner_in GITLAB_CI=true CI_JOB_URL=https://gitlab.com/acme/shop/-/jobs/7)
  jk=$(owner_in JENKINS_URL=https://ci.acme/ BUILD_URL=https://ci.acme/job/shop/9/)
  bk=$(owner_in BUILDKITE=true BUILDKITE_BUILD_URL=https://buildkite.com/acme/shop/builds/5 BUILDKITE_JOB_ID=j-1)
  plain=$(owner_in USER=alice HOSTNAME=box)
  check "the default owner is the CI job's URL (GitHub, GitLab, Jenkins, Buildkite), else user@host" \
    '[ "$gh|$gl|$jk|$bk|$plain" = "https://github.com/acme/shop/actions/runs/42|https://gitlab.com/acme/shop/-/jobs/7|https://ci.acme/job/shop/9/|https://buildkite.com/acme/shop/builds/5#j-1|alice@box" ]' \
    "$gh|$gl|$jk|$bk|$plain"


  closed=$(free_port)
  "${WL[@]}" --url "http://127.0.0.1:$closed" --wait 1 nowhere -- touch "$T/ran-anyway" 2>"$T/u.err"
  rc=$?
  check "an unreachable service exits 69 and COMMAND does not run" \
    '[ "$rc" = 69 ] && [ ! -e "$T/ran-anyway" ] && grep -q "http://127.0.0.1:$closed" "$T/u.err"' \
    "status $rc: $(cat "$T/u.err")"
}

suite "baton run" "$BATON_BIN" run
suite "with-lock" "$LAUNCHER"
LABEL=""
T="$TEST_TMP/once"
mkdir -p "$T"

# --- the launcher's own failures ---------------------------------------------

nocurl="$T/nocurl"
mkdir -p "$nocurl"
for tool in sleep cat uname; do ln -sf "$(command -v "$tool")" "$nocurl/$tool"; done
PATH=$nocurl /bin/sh "$LAUNCHER" --wait 4 pre-curl -- /bin/true 2>"$T/nocurl.err"; rc=$?
check "the launcher without curl exits 69 and acquires nothing" \
  '[ "$rc $(fence_exists pre-curl)" = "69 0" ] && grep -q "curl is not installed" "$T/nocurl.err"' \
  "status $rc; $(cat "$T/nocurl.err")"

mkdir -p "$T/mac"
printf '#!/bin/sh\ncase $1 in -s) echo Darwin;; -m) echo arm64;; esac\n' >"$T/mac/uname"
chmod +x "$T/mac/uname"
PATH="$T/mac:$PATH" "$LAUNCHER" mac -- true 2>"$T/mac.err"; rc=$?
check "on a platform the binary cannot run on, the launcher says so (69)" \
  '[ "$rc" = 69 ] && grep -q "Linux x86-64, and this is Darwin arm64" "$T/mac.err"' "status $rc; $(cat "$T/mac.err")"

# A service whose binary does not match its checksum, and one whose binary
# does not run here.
mkdir -p "$T/fake/bad" "$T/fake/broken"
printf '#!/bin/sh\necho fake\n' >"$T/fake/bad/baton"
printf '%064d  baton\n' 0 >"$T/fake/bad/baton.sha256"
printf '#!/bin/false\n' >"$T/fake/broken/baton"
(cd "$T/fake/broken" && sha256sum baton >baton.sha256)
fake_port=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$T/fake" "$fake_port" >/dev/null 2>&1 &
TRACKED_PIDS+=($!)
wait_for_http "http://127.0.0.1:$fake_port/bad/baton.sha256" 10
BATON_CACHE_DIR="$T/fakecache" "$LAUNCHER" --url "http://127.0.0.1:$fake_port/bad" x -- touch "$T/fake.ran" 2>"$T/bad.err"; r1=$?
BATON_CACHE_DIR="$T/fakecache" "$LAUNCHER" --url "http://127.0.0.1:$fake_port/broken" x -- touch "$T/fake.ran" 2>"$T/broken.err"; r2=$?
check "the launcher refuses a binary that does not match its checksum, or does not run (69), and caches neither" \
  '[ "$r1$r2" = 6969 ] && [ ! -e "$T/fake.ran" ] && grep -q "does not match" "$T/bad.err" && grep -q "cannot run here" "$T/broken.err" && [ -z "$(ls -A "$T/fakecache")" ]' \
  "statuses $r1 $r2; $(cat "$T/bad.err" "$T/broken.err"; ls -A "$T/fakecache")"

cached=("$BATON_CACHE_DIR"/baton-*)
check "the launcher cached the service's own binary, once, under its checksum" \
  '[ "${#cached[@]}" = 1 ] && cmp -s "${cached[0]}" "$BATON_BIN" && [ "${cached[0]##*/baton-}" = "$(sha256sum "$BATON_BIN" | cut -d " " -f 1)" ]' \
  "${cached[*]}"

# --- acquire and release in two steps ------------------------------------------

"$BATON_BIN" acquire -q --output env --ttl 1m 'two/steps:prod' >"$T/github_env"; r1=$?
(
  # A later CI step: $GITHUB_ENV's lines are its environment.
  while IFS= read -r line; do export "${line?}"; done <"$T/github_env"
  "$BATON_BIN" status 'two/steps:prod' >"$T/held.txt"
  "$BATON_BIN" refresh --ttl 2m >/dev/null || exit 11
  "$BATON_BIN" release 2>"$T/release.err" || exit 12
  "$BATON_BIN" release 2>"$T/again.err"
  exit $?
)
r2=$?
free=$("$BATON_BIN" status --output json 'two/steps:prod')
check "acquire --output env, then refresh and release in a later step from those variables" \
  '[ "$r1 $r2" = "0 76" ] && grep -qx "BATON_LOCK_NAME=two/steps:prod" "$T/github_env" && grep -Eqx "BATON_LEASE_ID=[0-9a-f-]{36}" "$T/github_env" && grep -Eqx "BATON_FENCING_TOKEN=[0-9]+" "$T/github_env" && grep -q "held by" "$T/held.txt" && [[ $free == *"\"held\":false"* ]] && grep -q "no longer held" "$T/again.err"' \
  "statuses $r1 $r2; $(cat "$T/github_env" "$T/held.txt" "$T/again.err"); $free"

"$BATON_BIN" acquire --wait 0 held/x -q --output json >/dev/null
"$BATON_BIN" acquire --wait 0 held/x -q 2>"$T/busy.err"; r1=$?
"$BATON_BIN" acquire --url "http://127.0.0.1:$(free_port)" --wait 0 x 2>/dev/null; r2=$?
"$BATON_BIN" list >"$T/list.txt"; r3=$?
check "acquire of a held lock exits 75, of an unreachable service 69; list shows what is held" \
  '[ "$r1$r2$r3" = 75690 ] && grep -q "held/x" "$T/list.txt"' "statuses $r1 $r2 $r3; $(cat "$T/busy.err" "$T/list.txt")"

# --- GET /baton ------------------------------------------------------------------

# The download recipe of docs/with-lock.md (its first sh block, up to the
# first ./baton run), run as it is, and again saving the binary elsewhere.
recipe=$(awk '/^```sh$/ {inblock=1; next} inblock && /^\.\/baton run/ {exit} inblock {print}' "$ROOT/docs/with-lock.md")
mkdir -p "$T/dl" "$T/elsewhere/bin"
(cd "$T/dl" && bash -e -c "$recipe" >/dev/null)
r1=$?
"$T/dl/baton" run -q dl -- true; r2=$?
elsewhere=$T/elsewhere/bin/baton-cli
moved=${recipe//-o baton/-o $elsewhere}
moved=${moved//  baton\"/  $elsewhere\"}
moved=${moved//chmod +x baton/chmod +x $elsewhere}
(cd "$T/elsewhere" && bash -e -c "$moved" >/dev/null 2>&1 && [ ! -e baton ] && cmp -s "$elsewhere" "$BATON_BIN" && [ -x "$elsewhere" ])
r3=$?
# ... and a binary that does not match is refused whatever it is called.
printf 'not baton\n' >"$elsewhere"
echo "$(curl -fsS "$BATON_URL/baton.sha256" | cut -d ' ' -f 1)  $elsewhere" | sha256sum -c - >/dev/null 2>&1; r4=$?
straight=$(grep -n 'baton.sha256" | sha256sum' "$ROOT/README.md" "$ROOT"/docs/*.md)
check "/baton downloaded and verified by the docs' recipe (also saved under another name), and run" \
  '[ "$r1 $r2 $r3 $r4" = "0 0 0 1" ] && [ -z "$straight" ] && [ "$("$T/dl/baton" --version)" = "$("$BATON_BIN" --version)" ]' \
  "recipe $r1, run $r2, elsewhere $r3, a wrong binary $r4; recipes that name ./baton: $straight; recipe: $recipe"

# --- completions and the manual ----------------------------------------------------

"$BATON_BIN" completions bash >"$T/baton.bash"; r1=$?
"$BATON_BIN" completions zsh >"$T/_baton"; r2=$?
"$BATON_BIN" completions fish >"$T/baton.fish"; r3=$?
check "completions for bash pass bash -n and offer the subcommands; zsh and fish are printed" \
  '[ "$r1$r2$r3" = 000 ] && bash -n "$T/baton.bash" && grep -q "acquire" "$T/baton.bash" && grep -q "newest-wins" "$T/_baton" && grep -q "newest-wins" "$T/baton.fish"' \
  "statuses $r1 $r2 $r3"

ensure_packages man-db >/dev/null 2>&1
"$BATON_BIN" man >"$T/baton.1" && "$BATON_BIN" man run >"$T/baton-run.1"
page=$(MANWIDTH=100 man -l "$T/baton.1" 2>&1 | col -b)
run_page=$(MANWIDTH=100 man -l "$T/baton-run.1" 2>&1 | col -b)
check "man -l renders baton's page and baton run's" \
  '[[ $page == *NAME*baton*SUBCOMMANDS*acquire* && $run_page == *baton-run*--newest-wins* ]]' "$page // $run_page"

# --- the launcher's size and style -----------------------------------------------------

sc=$(shellcheck "$LAUNCHER" 2>&1); sc_rc=$?
check "scripts/with-lock is POSIX sh (dash -n), shellcheck clean, at most 60 lines" \
  '[ "$sc_rc" = 0 ] && [ -z "$sc" ] && dash -n "$LAUNCHER" && [ "$(wc -l <"$LAUNCHER")" -le 60 ]' "status $sc_rc: $sc"
echo "    scripts/with-lock: $(wc -l <"$LAUNCHER") lines"
finish
