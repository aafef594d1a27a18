#!/usr/bin/env bash
# scripts/run.sh as a new user runs it: it builds baton, starts a private Redis
# with append-only persistence when none answers, serves, and on SIGTERM stops
# baton (exit 0) and its Redis.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
ensure_redis

redis_port=$(free_port)
baton_port=$(free_port)
data="$TEST_TMP/data"
BATON_DEV_REDIS_PORT=$redis_port BATON_DATA_DIR=$data BATON_LISTEN=127.0.0.1:$baton_port \
  RUST_LOG=warn bash "$ROOT/scripts/run.sh" >"$TEST_TMP/run.log" 2>&1 &
run_pid=$!
url="http://127.0.0.1:$baton_port"

if wait_for_http "$url/readyz" 600; then
  pass "scripts/run.sh serves, with Redis ready"
else
  fail "scripts/run.sh serves"; cat "$TEST_TMP/run.log"; kill "$run_pid"; finish; exit 1
fi
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/locks/run-test" -d '{"ttl_ms": 60000}')
if [ "$code" = 201 ]; then pass "a lock can be taken"; else fail "a lock can be taken ($code)"; fi
if redis-cli -p "$redis_port" config get appendonly | grep -q yes; then
  pass "the private Redis persists append-only"
else
  fail "the private Redis persists append-only"
fi
if [ -d "$data" ] && [ -n "$(ls -A "$data")" ]; then
  pass "its data is under BATON_DATA_DIR"
else
  fail "its data is under BATON_DATA_DIR"
fi

kill -TERM "$run_pid"
status=0
wait "$run_pid" || status=$?
if [ "$status" -eq 0 ]; then pass "SIGTERM stops it with status 0"; else fail "exit status $status"; fi
sleep 0.5
if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
  fail "the private Redis is stopped"
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1
else
  pass "the private Redis is stopped"
fi
if curl -s -o /dev/null "$url/healthz"; then fail "baton is stopped"; else pass "baton is stopped"; fi
finish
