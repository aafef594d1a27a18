#!/usr/bin/env bash
# The GitHub Actions (actions/run, acquire, release) and the GitLab CI/CD
# component (templates/baton-run.yml), run as their CI systems run them
# against a real baton with tokens: gha.py runs a job's steps with `${{ }}`
# expressions substituted and GITHUB_OUTPUT, GITHUB_ENV and
# GITHUB_STEP_SUMMARY files; gitlab.py renders the component's inputs and runs
# its job's script. Checked: two jobs on one name (the second waits for the
# first), outputs and the summary line, a lease across steps released by an
# `if: always()` step after a failure, the job's OIDC token sent instead of a
# stored one, and names and owners holding quotes and `$(...)` that run
# nothing.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
trap 'exit 130' INT TERM
cd "$ROOT" || exit 1

TOKEN=ci-test-token-5f0c2a9e71
# gha.py and gitlab.py read YAML: the system's PyYAML, else the venv of the
# schema checks (scripts/lib.sh), which has it.
PY=python3
python3 -c 'import yaml' 2>/dev/null || PY="$(ensure_ci_validators)/python"
if ! "$PY" -c 'import yaml' 2>/dev/null; then
  fail "setup: PyYAML"
  finish
  exit 1
fi
if ! start_stack BATON_API_TOKENS="$TOKEN" BATON_KEY_PREFIX=ci-test:; then
  fail "setup: redis-server and baton"
  finish
  exit 1
fi
export MARKS=$TEST_TMP/marks
mkdir -p "$MARKS"
J=$TEST_TMP/jobs
mkdir -p "$J"

# gha.py JOB.yml WORKDIR EXTRA...: one job, its log in WORKDIR/log.
gha() {
  local job=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  "$PY" "$HERE/gha.py" "$job" "$dir" --root "$ROOT" --var BATON_URL="$BATON_URL" \
    --secret BATON_TOKEN="$TOKEN" "$@" >"$dir/log" 2>&1
}
status_of() { # PATH-ENCODED-NAME: the lock's status JSON
  curl -sS -H "Authorization: Bearer $TOKEN" "$BATON_URL/locks/$1"
}
waiting_on() { # PATH-ENCODED-NAME: until one request waits in its line (a minute at most)
  for _ in $(seq 600); do
    status_of "$1" | grep -q '"waiting":1' && return 0
    sleep 0.1
  done
  return 1
}
until_file() { # FILE: until it exists (a minute at most)
  for _ in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done
  return 1
}
output() { # DIR STEP KEY
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"][sys.argv[2]]["outputs"].get(sys.argv[3], ""))' \
    "$1/result.json" "$2" "$3" 2>/dev/null
}

# --- GitHub: two jobs on one name --------------------------------------------
cat >"$J/deploy.yml" <<'YAML'
name: deploy
on: push
jobs:
  deploy:
    runs-on: ubuntu-latest
    env:
      BATON_URL: ${{ vars.BATON_URL }}
    steps:
      - uses: actions/checkout@v4
      - id: lock
        uses: acme/baton/actions/run@v1
        with:
          name: deploy/acme/shop:production
          token: ${{ secrets.BATON_TOKEN }}
          wait: 2m
          ttl: 10s
          command: |
            touch "$MARKS/$JOB.started"
            printf '%s %s\n' "$BATON_LOCK_NAME" "$BATON_FENCING_TOKEN" > "$MARKS/$JOB.lease"
            while [ ! -e "$MARKS/$JOB.go" ]; do sleep 0.1; done
            touch "$MARKS/$JOB.ended"
      - run: echo "${{ steps.lock.outputs.fencing-token }} ${{ steps.lock.outputs.waited-ms }}" > outputs
YAML
JOB=a gha "$J/deploy.yml" "$TEST_TMP/a" --github run_id=1001 &
pa=$!
until_file "$MARKS/a.started"
JOB=b gha "$J/deploy.yml" "$TEST_TMP/b" --github run_id=1002 &
pb=$!
lock=deploy%2Facme%2Fshop%3Aproduction
if waiting_on "$lock" && [ ! -e "$MARKS/b.started" ]; then
  pass "GitHub: the second job waits in line while the first holds the name"
else
  fail "GitHub: the second job did not wait: $(status_of "$lock"); $(cat "$TEST_TMP/b/log")"
fi
touch "$MARKS/a.go" "$MARKS/b.go"
wait "$pa"; ra=$?
wait "$pb"; rb=$?
read -r ta wa <"$TEST_TMP/a/outputs" 2>/dev/null
read -r tb wb <"$TEST_TMP/b/outputs" 2>/dev/null
if [ "$ra$rb" = 00 ] && [ "$MARKS/b.started" -nt "$MARKS/a.ended" ] && [[ ${ta:-} =~ ^[0-9]+$ ]] && [[ ${tb:-} =~ ^[0-9]+$ ]] && [ "$tb" -gt "$ta" ] &&
  [[ ${wa:-} =~ ^[0-9]+$ ]] && [[ ${wb:-} =~ ^[0-9]+$ ]] && [ "$wb" -gt 0 ] &&
  [ "$(cat "$MARKS/a.lease")" = "deploy/acme/shop:production $ta" ]; then
  pass "GitHub: both ran in turn; outputs fencing-token ($ta < $tb) and waited-ms ($wa, $wb) set"
else
  fail "GitHub: statuses $ra $rb, outputs '${ta:-} ${wa:-}' '${tb:-} ${wb:-}'; $(cat "$TEST_TMP/a/log" "$TEST_TMP/b/log")"
fi
summary=$(cat "$TEST_TMP/b/step_summary" 2>/dev/null)
# shellcheck disable=SC2016 # backticks are markdown here
if [ "$(wc -l <"$TEST_TMP/b/step_summary")" = 1 ] &&
  [[ $summary == '`https://github.com/acme/shop/actions/runs/1002` held lock `deploy/acme/shop:production` (fencing token '"$tb"') for '*'s, after waiting '*'s; the command exited 0' ]]; then
  pass "GitHub: one summary line: who held what, how long, after waiting how long"
else
  fail "GitHub: the summary is: $summary"
fi
if ! status_of "$lock" | grep -q '"held":true'; then
  pass "GitHub: the lock is free once both jobs are done"
else
  fail "GitHub: still held: $(status_of "$lock")"
fi

# --- GitHub: a name and an owner that would run commands if pasted ----------
evil="it's \"q\" \$(touch $MARKS/injected) \`touch $MARKS/injected2\` \${{ x }}"
cat >"$J/evil.yml" <<'YAML'
steps:
  - id: lock
    uses: ./actions/run
    with:
      url: ${{ vars.BATON_URL }}
      token: ${{ secrets.BATON_TOKEN }}
      name: ${{ vars.NAME }}
      owner: ${{ vars.NAME }}
      command: printf '%s' "$BATON_LOCK_NAME" > "$MARKS/evil.name"
YAML
gha "$J/evil.yml" "$TEST_TMP/evil" --var NAME="$evil"
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$MARKS/evil.name" 2>/dev/null)" = "$evil" ] &&
  [ ! -e "$MARKS/injected" ] && [ ! -e "$MARKS/injected2" ] &&
  grep -qF "lock \`it's \"q\" \$(touch $MARKS/injected) 'touch $MARKS/injected2'" "$TEST_TMP/evil/step_summary"; then
  pass "GitHub: a name and an owner with quotes, \$(...) and backticks are data: nothing injected runs"
else
  fail "GitHub: injection check: status $rc; $(ls "$MARKS"); $(cat "$TEST_TMP/evil/log" "$TEST_TMP/evil/step_summary")"
fi

# --- GitHub: a lease across steps, released after a failed step --------------
cat >"$J/steps.yml" <<'YAML'
env:
  BATON_URL: ${{ vars.BATON_URL }}
  BATON_TOKEN: ${{ secrets.BATON_TOKEN }}
steps:
  - id: take
    uses: ./actions/acquire
    with:
      name: db/acme/shop
      ttl: 5m
  - run: |
      echo "$BATON_LOCK_NAME ${{ steps.take.outputs.fencing-token }} $BATON_FENCING_TOKEN" > during
      curl -fsS -H "Authorization: Bearer $BATON_TOKEN" "$BATON_URL/locks/db%2Facme%2Fshop" > status
      exit 3
  - if: always()
    uses: ./actions/release
YAML
gha "$J/steps.yml" "$TEST_TMP/steps" --github run_id=2001
rc=$?
read -r dname dtoken denv <"$TEST_TMP/steps/during" 2>/dev/null
lease_id=$(sed -n 's/^BATON_LEASE_ID=\(.\+\)$/\1/p' "$TEST_TMP/steps/github_env" | head -1)
# shellcheck disable=SC2016 # backticks are markdown here
if [ "$rc" = 3 ] && [ "${dname:-}" = db/acme/shop ] && [[ ${dtoken:-} =~ ^[0-9]+$ ]] && [ "$dtoken" = "${denv:-}" ] &&
  grep -q '"owner":"https://github.com/acme/shop/actions/runs/2001"' "$TEST_TMP/steps/status" &&
  [ -n "$lease_id" ] && grep -qxF "$lease_id" <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["masks"]))' "$TEST_TMP/steps/result.json") &&
  ! status_of db%2Facme%2Fshop | grep -q '"held":true' &&
  grep -q '^`https://github.com/acme/shop/actions/runs/2001` held lock `db/acme/shop` (fencing token '"$dtoken"') for .*s, after waiting .*s; release exited 0$' "$TEST_TMP/steps/step_summary"; then
  pass "GitHub: acquire passes the lease on through \$GITHUB_ENV (id masked), release in an if: always() step after a failure"
else
  fail "GitHub: acquire/release: status $rc; $(cat "$TEST_TMP/steps/log" "$TEST_TMP/steps/step_summary")"
fi

# Nothing acquired (the name is held, wait 0): acquire fails, release has nothing to do.
cat >"$J/busy.yml" <<'YAML'
env:
  BATON_URL: ${{ vars.BATON_URL }}
  BATON_TOKEN: ${{ secrets.BATON_TOKEN }}
steps:
  - uses: ./actions/acquire
    with:
      name: busy
      wait: "0"
  - run: touch ran
  - if: always()
    uses: ./actions/release
YAML
holder=$(curl -fsS -H "Authorization: Bearer $TOKEN" -X POST -d '{"ttl_ms": 60000}' "$BATON_URL/locks/busy")
gha "$J/busy.yml" "$TEST_TMP/busy"
rc=$?
if [ "$rc" = 75 ] && [ ! -e "$TEST_TMP/busy/ran" ] && grep -q "no lease to release" "$TEST_TMP/busy/log" &&
  [ -n "$holder" ]; then
  pass "GitHub: a lease not had fails the acquire step (75); the release step has nothing to do"
else
  fail "GitHub: busy name: status $rc; $(cat "$TEST_TMP/busy/log")"
fi

# --- GitHub: the job's OIDC token instead of a stored secret -------------------
oidc_port=$(free_port)
python3 "$HERE/oidc_stub.py" "$oidc_port" "request-token-71c3" "$TOKEN" "$TEST_TMP/oidc.log" &
TRACKED_PIDS+=($!)
wait_for_http "http://127.0.0.1:$oidc_port/ready" 20
cat >"$J/oidc.yml" <<'YAML'
permissions:
  id-token: write
steps:
  - id: lock
    uses: ./actions/run
    with:
      url: ${{ vars.BATON_URL }}
      name: oidc/acme/shop
      oidc-audience: baton
      command: echo "$BATON_FENCING_TOKEN" > token
YAML
ACTIONS_ID_TOKEN_REQUEST_URL="http://127.0.0.1:$oidc_port/token?api-version=2.0" \
  ACTIONS_ID_TOKEN_REQUEST_TOKEN=request-token-71c3 BATON_TOKEN="" gha "$J/oidc.yml" "$TEST_TMP/oidc"
rc=$?
if [ "$rc" = 0 ] && [ -s "$TEST_TMP/oidc/token" ] && grep -qx "audience=baton authorization=ok" "$TEST_TMP/oidc.log" &&
  grep -qxF "$TOKEN" <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["masks"]))' "$TEST_TMP/oidc/result.json"); then
  pass "GitHub: oidc-audience sends the job's OIDC token (asked with the request token, masked) as the bearer token"
else
  fail "GitHub: OIDC: status $rc; $(cat "$TEST_TMP/oidc.log" "$TEST_TMP/oidc/log")"
fi

# --- docs/ci.md: its first example, as written ---------------------------------
python3 - "$ROOT/docs/ci.md" "$J/doc.yml" <<'PY'
import re, sys
open(sys.argv[2], "w").write(re.findall(r"```yaml\n(.*?)```", open(sys.argv[1]).read(), re.S)[0])
PY
mkdir -p "$TEST_TMP/doc"
cat >"$TEST_TMP/doc/deploy.sh" <<'SH'
#!/bin/sh
printf '%s %s\n' "$BATON_LOCK_NAME" "$*" > deployed
SH
chmod +x "$TEST_TMP/doc/deploy.sh"
gha "$J/doc.yml" "$TEST_TMP/doc" --github run_id=3001
rc=$?
read -r dname dwhat dtoken <"$TEST_TMP/doc/deployed" 2>/dev/null
if [ "$rc" = 0 ] && [ "${dname:-}" = deploy/acme/shop:production ] && [ "${dwhat:-}" = production ] &&
  [[ ${dtoken:-} =~ ^[0-9]+$ ]] && grep -q "fencing token $dtoken, [0-9]* ms in line" "$TEST_TMP/doc/log"; then
  pass "docs/ci.md: the first GitHub example runs as written (uses: acme/baton/actions/run@v1)"
else
  fail "docs/ci.md: the first GitHub example: status $rc; $(cat "$TEST_TMP/doc/log")"
fi

# shellcheck source-path=SCRIPTDIR source=gitlab_test.sh
. "$HERE/gitlab_test.sh"
finish
