#!/usr/bin/env bash
# Tests of scripts/with-lock against a real baton and Redis (tests/shell/lib.sh).
# Each test gives generous time margins: the machine may be slow and shared.
# The COMMANDs below are sh -c scripts in single quotes, expanded by sh:
# shellcheck disable=SC2016
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

WL="$ROOT/scripts/with-lock"
T="$TEST_TMP/wl"
mkdir -p "$T"

# A service maximum below the default --wait (10m) but above 30 s: a wrapper
# that waits with the default asks for 10 minutes, learns the maximum from the
# 400 and waits in requests of 60 s; a --wait of 45 s is one request.
start_stack BATON_MAX_WAIT_MS=60000

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Waits up to $2 seconds for file $1 to exist.
wait_for_file() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ -e "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# Waits up to $2 seconds for file $1 to contain a line matching the regex $3.
wait_for_line() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    grep -q -- "$3" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Prints the PIDs of the processes whose environment has WLMARK=$1: the
# wrappers started with that marker and everything they started. The test's
# shell does not export WLMARK, so the grep below is not one of them.
marked_processes() {
  grep -lzx -- "WLMARK=$1" /proc/[0-9]*/environ 2>/dev/null | tr -dc '0-9\n' | tr '\n' ' '
}

# Waits up to $2 seconds for background PID $1 to end; sets RC to its status
# (or kills it and sets RC=timeout).
wait_pid() {
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

# --- usage -------------------------------------------------------------------

out=$("$WL" --help 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [[ $out == *"Usage: with-lock"* ]] && [[ $out == *"76"*"lease was lost"* ]]; then
  pass "--help prints usage with the exit statuses"
else
  fail "--help: status $rc, output: $out"
fi

"$WL" >/dev/null 2>&1
rc1=$?
"$WL" --ttl soon x -- true >/dev/null 2>&1
rc2=$?
"$WL" 'bad name' -- true >/dev/null 2>&1
rc3=$?
if [ "$rc1" -eq 64 ] && [ "$rc2" -eq 64 ] && [ "$rc3" -eq 64 ]; then
  pass "bad usage exits 64"
else
  fail "bad usage: statuses $rc1 $rc2 $rc3, want 64"
fi

# --- the command's status and environment ----------------------------------

out=$("$WL" --owner "tester" env-test -- sh -c \
  'printf "%s\n%s\n%s\n" "$BATON_LOCK_NAME" "$BATON_FENCING_TOKEN" "$BATON_LEASE_ID" >"$1"; exit 42' \
  sh "$T/env" 2>&1)
rc=$?
name=$(sed -n 1p "$T/env" 2>/dev/null)
token=$(sed -n 2p "$T/env" 2>/dev/null)
id=$(sed -n 3p "$T/env" 2>/dev/null)
if [ "$rc" -eq 42 ]; then
  pass "COMMAND's exit status comes back (42)"
else
  fail "exit status: got $rc, want 42; output: $out"
fi
if [ "$name" = env-test ] && [[ $token =~ ^[0-9]+$ ]] &&
  [[ $id =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]]; then
  pass "COMMAND gets BATON_LOCK_NAME, BATON_FENCING_TOKEN and BATON_LEASE_ID"
else
  fail "COMMAND's environment: name='$name' token='$token' id='$id'"
fi
if [ -n "$id" ] && [[ $out != *"$id"* ]]; then
  pass "the lease id is not printed"
else
  fail "the lease id shows in the output: $out"
fi
held=$(curl -sS "$BATON_URL/locks/env-test")
if [[ $held == *'"held":false'* ]]; then
  pass "the lock is released when COMMAND exits"
else
  fail "lock still held after COMMAND exited: $held"
fi

# --- mutual exclusion --------------------------------------------------------

# Each command takes a marker directory for 2 s; a second one inside would
# fail to create it.
excl_cmd='mkdir "$1/inside" 2>/dev/null || echo overlap >>"$1/violations"
echo ran >>"$1/ran"; sleep 2; rmdir "$1/inside" 2>/dev/null'
mkdir -p "$T/excl"
pids=()
for i in 1 2; do
  "$WL" --quiet --owner "excl-$i" excl -- sh -c "$excl_cmd" sh "$T/excl" &
  pids+=($!)
done
statuses=""
for p in "${pids[@]}"; do
  wait_pid "$p" 30
  statuses+=" $RC"
done
runs=$(wc -l <"$T/excl/ran" 2>/dev/null || echo 0)
if [ "$statuses" = " 0 0" ] && [ "$runs" -eq 2 ] && [ ! -e "$T/excl/violations" ]; then
  pass "two wrappers started together never run their commands at once"
else
  fail "mutual exclusion: statuses$statuses, runs $runs, violations: $(cat "$T/excl/violations" 2>/dev/null)"
fi

# --- semaphore ---------------------------------------------------------------

# Each command counts the commands running (itself included) when it starts.
sem_cmd='mkdir "$1/running/$2"; ls "$1/running" | wc -l >>"$1/counts"
sleep 2; rmdir "$1/running/$2"'
mkdir -p "$T/sem/running"
pids=()
for i in 1 2 3 4; do
  "$WL" --quiet --limit 2 --owner "sem-$i" builders -- sh -c "$sem_cmd" sh "$T/sem" "$i" &
  pids+=($!)
done
statuses=""
for p in "${pids[@]}"; do
  wait_pid "$p" 30
  statuses+=" $RC"
done
max=$(sort -n "$T/sem/counts" 2>/dev/null | tail -n 1)
runs=$(wc -l <"$T/sem/counts" 2>/dev/null || echo 0)
if [ "$statuses" = " 0 0 0 0" ] && [ "$runs" -eq 4 ] && [ "${max:-0}" -eq 2 ]; then
  pass "--limit 2 with four wrappers runs two at once, never more"
else
  fail "semaphore: statuses$statuses, runs $runs, most at once ${max:-none} (want 2)"
fi

# --- waiting, timing out, and SIGTERM ---------------------------------------

"$WL" --owner "deploy-A" busy -- sh -c 'echo $$ >"$1"; exec sleep 60' sh "$T/a.pid" \
  2>"$T/a.err" &
a=$!
if wait_for_file "$T/a.pid" 15; then
  start=$(now_ms)
  "$WL" --wait 1.5 busy -- true 2>"$T/b.err"
  rc=$?
  took=$(($(now_ms) - start))
  if [ "$rc" -eq 75 ] && [ "$took" -ge 1400 ] && [ "$took" -lt 10000 ] &&
    grep -q "waiting for lock 'busy': held by deploy-A, expires in" "$T/b.err" &&
    grep -q "could not acquire lock 'busy' within 1.5s" "$T/b.err"; then
    pass "a wrapper that cannot get the lock in --wait says who holds it and exits 75"
  else
    fail "timeout: status $rc after ${took} ms, stderr: $(cat "$T/b.err")"
  fi

  start=$(now_ms)
  kill -TERM "$a"
  wait_pid "$a" 20
  took=$(($(now_ms) - start))
  if [ "$RC" = 143 ] && ! kill -0 "$(cat "$T/a.pid")" 2>/dev/null; then
    pass "SIGTERM stops COMMAND and the wrapper exits 143 (in ${took} ms)"
  else
    fail "SIGTERM: status $RC after ${took} ms; stderr: $(cat "$T/a.err")"
  fi
  # --wait 0: acquired only if the lock was released at once, not left to its ttl.
  if "$WL" --wait 0 --quiet busy -- true 2>"$T/c.err"; then
    pass "after SIGTERM the lock is free at once: another wrapper acquires it without waiting"
  else
    fail "lock not released on SIGTERM: $(cat "$T/c.err")"
  fi
else
  fail "the first wrapper never started its command: $(cat "$T/a.err")"
  kill "$a" 2>/dev/null
fi

# --- long waits: one request, a place in line, progress meanwhile -------------

# A semaphore's waiters are admitted first come, first served, and each wrapper
# waits in a single request (--wait 45 s is more than a 30 s step and less than
# the service's 60 s maximum), so no later waiter overtakes an earlier one. A
# waiter interrupted with SIGINT leaves the line without taking a slot.
fair_cmd='echo "$2" >>"$1/order"; sleep 0.5'
mkdir -p "$T/fair"
"$WL" --limit 1 --owner fair-holder fair -- sh -c 'echo holder >>"$1/order"; : >"$1/holding"; sleep 6' \
  sh "$T/fair" 2>"$T/fair/holder.err" &
fh=$!
if wait_for_file "$T/fair/holding" 15; then
  held_at=$(now_ms)
  "$WL" --limit 1 --wait 45 --owner fair-1 fair -- sh -c "$fair_cmd" sh "$T/fair" first \
    2>"$T/fair/1.err" &
  f1=$!
  # Queued: its first progress line comes after the try that found the slot
  # taken; its waiting request follows at once (1 s of margin).
  wait_for_line "$T/fair/1.err" 10 "waiting for semaphore 'fair'" && sleep 1
  # The interrupted one, queued in between; job control so that it does not
  # ignore SIGINT as background commands otherwise do.
  set -m
  WLMARK=fair-int "$WL" --limit 1 --wait 45 --owner fair-int fair -- sh -c "$fair_cmd" sh "$T/fair" interrupted \
    2>"$T/fair/int.err" &
  fi_pid=$!
  set +m
  wait_for_line "$T/fair/int.err" 10 "waiting for semaphore 'fair'" && sleep 1
  "$WL" --limit 1 --wait 45 --owner fair-2 fair -- sh -c "$fair_cmd" sh "$T/fair" second \
    2>"$T/fair/2.err" &
  f2=$!
  wait_for_line "$T/fair/2.err" 10 "waiting for semaphore 'fair'" && sleep 0.5
  start=$(now_ms)
  queued_for=$((start - held_at))
  kill -INT "$fi_pid"
  wait_pid "$fi_pid" 10
  int_rc=$RC
  int_took=$(($(now_ms) - start))
  sleep 0.3
  stray=$(marked_processes fair-int)
  wait_pid "$f1" 30
  rc1=$RC
  wait_pid "$f2" 30
  rc2=$RC
  wait_pid "$fh" 10
  order=$(tr '\n' ' ' <"$T/fair/order")
  # All three were queued while the slot was held (6 s) and in line.
  if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$order" = "holder first second " ] &&
    [ "$queued_for" -lt 6000 ]; then
    pass "--limit 1 waiters with a long --wait are admitted in the order they queued (${order% })"
  else
    fail "order: '$order' (want 'holder first second'), statuses $rc1 $rc2, all queued within ${queued_for} ms of 6000;" \
      "stderr: $(cat "$T/fair/1.err" "$T/fair/2.err")"
  fi
  if [ "$int_rc" = 130 ] && [ "$int_took" -lt 5000 ] && [ -z "$stray" ] &&
    grep -q "got SIGINT while waiting for semaphore 'fair'; giving up" "$T/fair/int.err"; then
    pass "SIGINT during a long wait ends it at once (${int_took} ms, status 130), leaving no process behind"
  else
    fail "SIGINT while waiting: status $int_rc after ${int_took} ms, processes left: '$stray'; stderr: $(cat "$T/fair/int.err")"
  fi
  status=$(curl -sS "$BATON_URL/semaphores/fair")
  if [[ $status == *'"holders":0'* ]]; then
    pass "the interrupted waiter took no slot and the others released theirs"
  else
    fail "semaphore still held after all wrappers ended: $status"
  fi
else
  fail "the holder never started its command: $(cat "$T/fair/holder.err")"
  kill "$fh" 2>/dev/null
fi

# While one long request waits, a separate status loop still says every few
# seconds who holds the lock, and stops as soon as the request returns. A curl
# first in PATH notes the wait_ms of each acquire request: with the default
# --wait (10m) the wrapper tries once without waiting, asks for the whole
# 10 minutes, learns the service's maximum (60 s) from the 400 and waits for
# the lock in one request of 60 s.
mkdir -p "$T/bin"
cat >"$T/bin/curl" <<EOF
#!/bin/sh
for a in "\$@"; do
  case \$a in *'"wait_ms":'*) printf '%s\n' "\$a" >>"$T/posts" ;; esac
done
exec $(printf '%q' "$(command -v curl)") "\$@"
EOF
chmod +x "$T/bin/curl"
"$WL" --owner "slow-holder" slow -- sh -c ': >"$1"; sleep 8' sh "$T/slow.holding" 2>"$T/slow.err" &
sh_pid=$!
if wait_for_file "$T/slow.holding" 15; then
  WLMARK=progress PATH="$T/bin:$PATH" "$WL" slow -- sh -c 'echo "$BATON_LEASE_ID" >"$1"' sh "$T/slow.id" \
    2>"$T/p.err"
  rc=$?
  stray=$(marked_processes progress)
  wait_pid "$sh_pid" 10
  lines=$(grep -c "waiting for lock 'slow': held by slow-holder, expires in" "$T/p.err")
  after=$(sed -n '/acquired lock/,$p' "$T/p.err" | grep -c "waiting for")
  id=$(cat "$T/slow.id" 2>/dev/null)
  # Lines at about 0 s and 5 s of a wait of about 8 s.
  if [ "$rc" -eq 0 ] && [ "$lines" -ge 2 ] && [ "$after" -eq 0 ] && [ -n "$id" ] &&
    ! grep -qF -- "$id" "$T/p.err" && [ -z "$stray" ]; then
    pass "progress lines every few seconds during one long wait ($lines lines), none after acquiring, no process left"
  else
    fail "progress: status $rc, $lines progress lines, $after after acquiring, processes left: '$stray'; stderr: $(cat "$T/p.err")"
  fi
  read -r -a waits <<<"$(sed -n 's/.*"wait_ms":\([0-9]*\).*/\1/p' "$T/posts" 2>/dev/null | tr '\n' ' ')"
  if [ "${#waits[@]}" -eq 3 ] && [ "${waits[0]}" -eq 0 ] && [ "${waits[1]}" -gt 590000 ] &&
    [ "${waits[2]}" -eq 60000 ]; then
    pass "acquire requests wait as long as the service allows (wait_ms: ${waits[*]})"
  else
    fail "acquire requests' wait_ms: '${waits[*]}', want 0, about 600000 (refused), 60000"
  fi
else
  fail "the holder never started its command: $(cat "$T/slow.err")"
  kill "$sh_pid" 2>/dev/null
fi

# --- a lease taken away -----------------------------------------------------

"$WL" --ttl 3 taken -- sh -c 'echo $$ >"$1"; exec sleep 60' sh "$T/t.pid" 2>"$T/t.err" &
w=$!
if wait_for_file "$T/t.pid" 15; then
  code=$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$BATON_URL/locks/taken")
  start=$(now_ms)
  wait_pid "$w" 20
  took=$(($(now_ms) - start))
  # Refreshes come every second (ttl/3): 404 within about a second; 5 s of margin.
  if [ "$code" = 204 ] && [ "$RC" = 76 ] && [ "$took" -lt 6000 ] &&
    ! kill -0 "$(cat "$T/t.pid")" 2>/dev/null &&
    grep -q "lease on lock 'taken' lost" "$T/t.err"; then
    pass "a force-released lease stops COMMAND within a refresh period and exits 76 (${took} ms)"
  else
    fail "lease lost: force-release $code, status $RC after ${took} ms; stderr: $(cat "$T/t.err")"
  fi
else
  fail "the wrapper never started its command: $(cat "$T/t.err")"
  kill "$w" 2>/dev/null
fi

# --- an unreachable service --------------------------------------------------

closed=$(free_port)
start=$(now_ms)
"$WL" --url "http://127.0.0.1:$closed" --wait 1 nowhere -- true 2>"$T/u.err"
rc=$?
took=$(($(now_ms) - start))
if [ "$rc" -eq 77 ] && [ "$took" -lt 10000 ] &&
  grep -q "error: cannot reach http://127.0.0.1:$closed" "$T/u.err"; then
  pass "an unreachable service exits 77 with a readable message"
else
  fail "unreachable: status $rc after ${took} ms, stderr: $(cat "$T/u.err")"
fi
if "$WL" --url "http://127.0.0.1:$closed" --wait 0 nowhere -- touch "$T/ran-anyway" 2>/dev/null ||
  [ -e "$T/ran-anyway" ]; then
  fail "COMMAND ran without the lock"
else
  pass "COMMAND does not run when the lock cannot be acquired"
fi

# --- shellcheck --------------------------------------------------------------

ensure_packages shellcheck >/dev/null 2>&1 || true
if command -v shellcheck >/dev/null 2>&1; then
  if sc=$(shellcheck "$WL" 2>&1); then
    pass "shellcheck scripts/with-lock"
  else
    fail "shellcheck scripts/with-lock: $sc"
  fi
else
  echo "skip - shellcheck is not installed"
fi

# --- the service gone while COMMAND runs (last: it stops the service) ------

"$WL" --ttl 3 outage -- sh -c 'echo $$ >"$1"; exec sleep 60' sh "$T/o.pid" 2>"$T/o.err" &
w=$!
if wait_for_file "$T/o.pid" 15; then
  kill "$BATON_PID" && wait "$BATON_PID" 2>/dev/null
  BATON_PID=""
  # The lease lapses at most 3 s after the last refresh; then COMMAND is stopped.
  wait_pid "$w" 20
  if [ "$RC" = 76 ] && ! kill -0 "$(cat "$T/o.pid")" 2>/dev/null &&
    grep -q "could not refresh the lease" "$T/o.err" &&
    grep -q "expired while the service could not be reached" "$T/o.err"; then
    pass "a service unreachable until the lease expires stops COMMAND and exits 76"
  else
    fail "outage: status $RC; stderr: $(cat "$T/o.err")"
  fi
else
  fail "the wrapper never started its command: $(cat "$T/o.err")"
  kill "$w" 2>/dev/null
fi

finish
