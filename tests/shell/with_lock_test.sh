#!/usr/bin/env bash
# Tests of scripts/with-lock against real baton instances and Redis
# (tests/shell/lib.sh). Time margins are generous: the machine may be shared.
# The COMMANDs below are sh -c scripts in single quotes, expanded by sh:
# shellcheck disable=SC2016
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

WL="$ROOT/scripts/with-lock"
T="$TEST_TMP/wl"
mkdir -p "$T"
start_stack
B_URL=$BATON_URL # instance B: the one the stack started

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
check() { if eval "$2"; then pass "$1"; else fail "$1: $3"; fi; }
# Runs check only when the service has FEATURE (a word of its OpenAPI document),
# so that this file passes on a service older than the feature, and says so.
check_with() { # FEATURE NAME TEST DETAIL
  if grep -q "\"$1\"" "$T/openapi.json"; then check "$2" "$3" "$4"; else echo "skip - $2 (the service has no $1)"; fi
}
curl -sS "$B_URL/openapi.json" >"$T/openapi.json"

# --- usage and what is checked before anything is acquired -------------------

out=$("$WL" --help 2>&1)
check "--help prints usage, the exit statuses and the stop margin" \
  '[[ $out == *"Usage: with-lock"* && $out == *"79 "*superseded* && $out == *"--grace plus one"*"refresh round trip"* ]]' "$out"
"$WL" >/dev/null 2>&1; r1=$?
"$WL" --ttl soon x -- true >/dev/null 2>&1; r2=$?
"$WL" --ttl 3 --grace 5 x -- true >/dev/null 2>&1; r3=$?
check "bad usage exits 64 (no NAME, bad duration, --ttl too short for --grace)" \
  '[ "$r1$r2$r3" = 646464 ]' "statuses $r1 $r2 $r3"

"$WL" --wait 4 pre-cmd -- /nonexistent/cmd 2>"$T/pre1.err"; r1=$?
nocurl="$T/nocurl"
mkdir -p "$nocurl"
for tool in sleep cat; do ln -sf "$(command -v "$tool")" "$nocurl/$tool"; done
PATH=$nocurl "$BASH" "$WL" --wait 4 pre-curl -- "$(command -v true)" 2>"$T/pre2.err"; r2=$?
TMPDIR=/nonexistent "$WL" --wait 4 pre-tmp -- true 2>"$T/pre3.err"; r3=$?
fences="$(fence_exists pre-cmd)$(fence_exists pre-curl)$(fence_exists pre-tmp)"
check "a missing COMMAND (127), curl (77) or TMPDIR (77) fails at once and acquires nothing" \
  '[ "$r1 $r2 $r3 $fences" = "127 77 77 000" ] && grep -q "curl is not installed" "$T/pre2.err" && grep -q TMPDIR "$T/pre3.err"' \
  "statuses $r1 $r2 $r3, fencing counters $fences; $(cat "$T"/pre*.err)"

# --- names, status, environment ------------------------------------------------

name='review/app 1 é:{x}*'
out=$("$WL" --owner tester "$name" -- sh -c \
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
for i in 1 2 3; do "$WL" -q --wait 1m excl -- sh -c "$excl" sh "$T/excl" & pids+=($!); done
st=""
for p in "${pids[@]}"; do wait_pid "$p" 30; st+=" $RC"; done
check "three wrappers on one lock never run their commands at once" \
  '[ "$st" = " 0 0 0" ] && [ "$(wc -l <"$T/excl/ran")" = 3 ] && [ ! -e "$T/excl/bad" ]' \
  "statuses$st, overlaps: $(cat "$T/excl/bad" 2>/dev/null)"

sem='mkdir "$1/run/$2"; ls "$1/run" | wc -l >>"$1/counts"; sleep 1; rmdir "$1/run/$2"'
mkdir -p "$T/sem/run"
pids=()
for i in 1 2 3 4; do "$WL" -q --limit 2 --wait 1m 'builders/x86' -- sh -c "$sem" sh "$T/sem" "$i" & pids+=($!); done
st=""
for p in "${pids[@]}"; do wait_pid "$p" 30; st+=" $RC"; done
most=$(sort -n "$T/sem/counts" | tail -n 1)
check "--limit 2 with four wrappers runs two at once, never more" \
  '[ "$st" = " 0 0 0 0" ] && [ "$most" = 2 ]' "statuses$st, most at once: $most"

# --- the whole process group keeps the lease -----------------------------------

start=$(now_ms)
WLMARK="bg" "$WL" --owner bg-holder bg-child -- bash -c 'sleep 3 & exit 0' 2>"$T/bg.err" &
bg=$!
wait_for_line "$T/bg.err" 10 "holding lock 'bg-child' until its other processes"
"$WL" --wait 0 bg-child -- true 2>"$T/bg2.err"; r_busy=$?
wait_pid "$bg" 20
took=$(($(now_ms) - start))
check "a background child keeps the lease: the lock is held until it has exited" \
  '[ "$r_busy" = 75 ] && [ "$RC" = 0 ] && [ "$took" -ge 2900 ] && [ -z "$(marked bg)" ]' \
  "busy check $r_busy, status $RC after $took ms; $(cat "$T/bg.err" "$T/bg2.err")"

# --- signals --------------------------------------------------------------------

WLMARK=sig "$WL" --owner sig-holder --grace 2 sig -- bash -c 'sleep 60 & sleep 60' 2>"$T/sig.err" &
h=$!
wait_for_line "$T/sig.err" 10 "acquired lock 'sig'"
WLMARK=sigw "$WL" --wait 1m sig -- true 2>"$T/sigw.err" &
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
  '[ "$RC" = 143 ] && [ "$took" -lt 4000 ] && [ -z "$(marked sig)" ] && "$WL" -q --wait 0 sig -- true' \
  "status $RC after $took ms, left: '$(marked sig)'; $(cat "$T/sig.err")"

# --- a lease taken away ------------------------------------------------------------

WLMARK=taken "$WL" --ttl 3 --grace 1 taken/x -- bash -c 'trap "" TERM; sleep 60 & sleep 60' 2>"$T/t.err" &
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
WLMARK=frozen "$WL" --url "$A_URL" --ttl 6 --grace 1 --owner frozen frozen -- bash -c '
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

"$WL" --owner line-holder line -- sleep 7 2>"$T/l0.err" &
h=$!
wait_for_line "$T/l0.err" 10 "acquired"
"$WL" --owner line-1 --wait 1m line -- true 2>"$T/l1.err" &
w1=$!
sleep 0.5
"$WL" --owner line-2 --wait 1m line -- true 2>"$T/l2.err" &
w2=$!
wait_pid "$w2" 30
wait_pid "$w1" 30
wait_pid "$h" 10
check_with waiters "while waiting it prints its place in line and the holder" \
    'grep -q "waiting for lock '"'"'line'"'"': place 2 of 2 in line; held by line-holder (expires in" "$T/l2.err" && grep -q "place 1 of 2 in line" "$T/l1.err"' \
  "$(cat "$T/l1.err" "$T/l2.err")"

# A curl first in PATH notes the wait_ms of each acquire request. Instance A
# allows 3 s: the wrapper asks for its 8 s, is refused with max_wait_ms and
# waits in requests of 3 s until the holder (5 s) is done.
mkdir -p "$T/bin"
printf '#!/bin/sh\nfor a in "$@"; do case $a in *wait_ms*) printf "%%s\\n" "$a" >>%q;; esac; done\nexec %q "$@"\n' \
  "$T/posts" "$(command -v curl)" >"$T/bin/curl"
chmod +x "$T/bin/curl"
"$WL" --url "$A_URL" steps -- sleep 5 2>/dev/null &
h=$!
sleep 0.5
PATH="$T/bin:$PATH" "$WL" --url "$A_URL" --wait 8 steps -- true 2>"$T/steps.err"
rc=$?
wait_pid "$h" 10
waits=$(sed -n 's/.*"wait_ms":\([0-9]*\).*/\1/p' "$T/posts" | tr '\n' ' ')
check_with max_wait_ms "a wait over the service's maximum is done in steps of its max_wait_ms" \
  '[ "$rc" = 0 ] && [[ $waits =~ ^[78][0-9]{3}\ 3000\ 3000 ]]' "status $rc, wait_ms sent: $waits; $(cat "$T/steps.err")"

# --- newest wins -----------------------------------------------------------------------

"$WL" --owner deploy-0 deploy/prod -- sleep 4 2>"$T/n0.err" &
h=$!
wait_for_line "$T/n0.err" 10 "acquired"
"$WL" --newest-wins --owner deploy-1 --wait 1m deploy/prod -- touch "$T/n1.ran" 2>"$T/n1.err" &
n1=$!
sleep 1
"$WL" --newest-wins --owner deploy-2 --wait 1m deploy/prod -- touch "$T/n2.ran" 2>"$T/n2.err" &
n2=$!
wait_pid "$n1" 30
r1=$RC
wait_pid "$n2" 30
r2=$RC
wait_pid "$h" 10
check_with newest_wins "--newest-wins: an older waiter is superseded (exit 79, COMMAND not run), the newest runs" \
  '[ "$r1" = 79 ] && [ "$r2" = 0 ] && [ ! -e "$T/n1.ran" ] && [ -e "$T/n2.ran" ] && grep -q "superseded.*deploy-2" "$T/n1.err"' \
  "statuses $r1 $r2; $(cat "$T/n1.err" "$T/n2.err")"

# --- owner defaults ----------------------------------------------------------------------

owner_in() { # ENV...: the owner shown in status while with-lock holds "owner"
  env -u GITHUB_ACTIONS -u GITLAB_CI -u JENKINS_URL -u BUILDKITE "$@" "$WL" -q owner -- \
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

# --- unreachable, shellcheck, size ---------------------------------------------------------

closed=$(free_port)
"$WL" --url "http://127.0.0.1:$closed" --wait 1 nowhere -- touch "$T/ran-anyway" 2>"$T/u.err"
rc=$?
check "an unreachable service exits 77 and COMMAND does not run" \
  '[ "$rc" = 77 ] && [ ! -e "$T/ran-anyway" ] && grep -q "cannot reach http://127.0.0.1:$closed" "$T/u.err"' \
  "status $rc: $(cat "$T/u.err")"

ensure_packages shellcheck >/dev/null 2>&1 || true
sc=$(shellcheck "$WL" 2>&1)
check "shellcheck scripts/with-lock" '[ $? = 0 ] && [ -z "$sc" ]' "$sc"
echo "    scripts/with-lock: $(wc -l <"$WL") lines"
finish
