#!/usr/bin/env bash
# The CI examples of docs/ci.md, run as their CI systems would run them: every
# shell line of each job (GitHub `run: |` steps, each in a shell of its own
# with what earlier steps appended to $GITHUB_ENV, `if: always()` steps even
# after a failure; GitLab `before_script` and `script` in one shell, then
# `after_script` in another), in a fresh directory with a stub deploy.sh, the
# CI variables set as the CI sets them, and baton fetched from the service as
# the examples do.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
start_stack

DOC="$ROOT/docs/ci.md"
# The steps of the N-th yaml block of docs/ci.md, from "Without the actions" on: each step opens with a line
# "### STEP always|normal", then its shell lines.
job_steps() {
  python3 - "$DOC" "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# The blocks that use the client itself (tests/ci/run.sh runs the actions).
text = text[text.index("## Without the actions"):]
block = re.findall(r"```yaml\n(.*?)```", text, re.S)[int(sys.argv[2])]
lines = block.splitlines()
steps, gitlab_main, i, step_if = [], [], 0, ""
while i < len(lines):
    line = lines[i]
    if re.match(r"^\s*- (name|uses|run):", line) or re.match(r"^\s*- if:", line):
        step_if = ""
    m_if = re.match(r"^\s*-?\s*if: (.*)$", line)
    if m_if:
        step_if = m_if.group(1)
    m = re.match(r"^(\s*)(?:- )?(run: \||script:|before_script:|after_script:)$", line)
    i += 1
    if not m:
        continue
    indent, kind, body = len(m.group(1)), m.group(2), []
    while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
        item = lines[i].strip()
        i += 1
        if kind == "run: |":
            body.append(item)
        elif item.startswith("- "):
            body.append(item[2:])
    if kind == "run: |":
        steps.append(("always" if "always()" in step_if else "normal", body))
    elif kind == "after_script:":
        steps.append(("always", body))
    else:
        gitlab_main += body
if gitlab_main:
    steps.insert(0, ("normal", gitlab_main))
for when, body in steps:
    print("### STEP " + when)
    print("\n".join(body))
PY
}

# Runs the N-th yaml block as a job in DIR with ENV...: its status is that of
# the first step that failed. The job's deploy.sh records the lock name, its
# arguments and the status the service shows meanwhile, and with DEPLOY_UNTIL
# set, deploys until that file exists.
run_job() { # N DIR ENV...
  local n=$1 dir=$2 status=0 k=0 when file line
  shift 2
  mkdir -p "$dir"
  cat >"$dir/deploy.sh" <<'SH'
#!/bin/sh
printf '%s\n' "$BATON_LOCK_NAME" >deployed
printf '%s\n' "$@" >args
curl -sS "$BATON_URL/locks/$(printf '%s' "$BATON_LOCK_NAME" | sed 's|/|%2F|g; s|:|%3A|g')" >status
# The test lets a deploy end by creating $DEPLOY_UNTIL (at most 2 minutes).
i=0
while [ -n "${DEPLOY_UNTIL:-}" ] && [ ! -e "$DEPLOY_UNTIL" ] && [ "$i" -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
[ -z "${DEPLOY_FAILS:-}" ]
SH
  chmod +x "$dir/deploy.sh"
  : >"$dir/github_env"
  job_steps "$n" | awk -v dir="$dir" '/^### STEP /{k++; print $3 > (dir "/when" k); next} {print > (dir "/step" k ".sh")}'
  while [ -e "$dir/step$((k + 1)).sh" ]; do
    k=$((k + 1))
    when=$(cat "$dir/when$k")
    [ "$status" = 0 ] || [ "$when" = always ] || continue
    local appended=()
    while IFS= read -r line; do [ -n "$line" ] && appended+=("$line"); done <"$dir/github_env"
    # A step that has not ended within 2 minutes has hung: it fails.
    (cd "$dir" && env -u GITHUB_ACTIONS -u GITLAB_CI -u JENKINS_URL -u BUILDKITE "$@" \
      BATON_URL="$BATON_URL" GITHUB_ENV="$dir/github_env" "${appended[@]}" \
      timeout -k 5 120 bash -e "step$k.sh" >>job.log 2>&1)
    file=$?
    [ "$status" != 0 ] || [ "$file" = 0 ] || status=$file
  done
  [ "$k" -gt 0 ] || { echo "no steps in block $n" >>"$dir/job.log"; status=1; }
  return "$status"
}
held() { curl -sS "$BATON_URL/locks/$1" | grep -q '"held":true'; }

github=(GITHUB_ACTIONS=true GITHUB_SERVER_URL=https://github.com GITHUB_REPOSITORY=acme/shop)
T=$TEST_TMP/ci

run_job 0 "$T/gh" "${github[@]}" GITHUB_RUN_ID=101
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$T/gh/deployed")" = "deploy/acme/shop:production" ] &&
  grep -q '"owner":"https://github.com/acme/shop/actions/runs/101"' "$T/gh/status" &&
  cmp -s "$T/gh/baton" "$BATON_BIN" && ! held deploy%2Facme%2Fshop%3Aproduction; then
  pass "GitHub Actions example: fetches and checks baton, deploys under 'deploy/acme/shop:production', owner is the run URL"
else
  fail "GitHub Actions example: status $rc; $(cat "$T/gh/job.log" "$T/gh/status" 2>/dev/null)"
fi

# Newest wins: while run 1 deploys, runs 2 and 3 queue; 3 replaces 2, which
# ends green without deploying; 3 deploys after 1.
waiting_on() { # LOCK-PATH: until one request waits in its line (at most a minute)
  for _ in $(seq 600); do
    curl -sS "$BATON_URL/locks/$1" | grep -q '"waiting":1' && return 0
    sleep 0.1
  done
  return 1
}
DEPLOY_UNTIL="$T/n1.done" run_job 1 "$T/n1" "${github[@]}" GITHUB_RUN_ID=1 &
p1=$!
for _ in $(seq 600); do [ -e "$T/n1/deployed" ] && break; sleep 0.1; done
run_job 1 "$T/n2" "${github[@]}" GITHUB_RUN_ID=2 &
p2=$!
waiting_on deploy%2Facme%2Fshop%3Astaging
run_job 1 "$T/n3" "${github[@]}" GITHUB_RUN_ID=3 &
p3=$!
wait "$p2"; r2=$?
touch "$T/n1.done"
wait "$p1"; r1=$?
wait "$p3"; r3=$?
if [ "$r1$r2$r3" = 000 ] && [ -e "$T/n1/deployed" ] && [ ! -e "$T/n2/deployed" ] &&
  [ -e "$T/n3/deployed" ] && grep -q "superseded by a newer run" "$T/n2/job.log"; then
  pass "GitHub --newest-wins example: the superseded run ends green without deploying; the newest deploys"
else
  fail "GitHub --newest-wins example: statuses $r1 $r2 $r3; $(cat "$T"/n*/job.log)"
fi

# A lock across steps: taken in one, the deploy in another, released in a
# third, also when the deploy fails.
run_job 2 "$T/steps" "${github[@]}" GITHUB_RUN_ID=201
rc=$?
DEPLOY_FAILS=1 run_job 2 "$T/steps-fail" "${github[@]}" GITHUB_RUN_ID=202
rc_fail=$?
if [ "$rc" = 0 ] && [ "$(cat "$T/steps/deployed")" = "db/acme/shop:production" ] &&
  grep -Eqx '[0-9]+' <(sed -n 2p "$T/steps/args") &&
  grep -q '"owner":"https://github.com/acme/shop/actions/runs/201"' "$T/steps/status" &&
  grep -q '^BATON_LEASE_ID=' "$T/steps/github_env" &&
  [ "$rc_fail" != 0 ] && [ -e "$T/steps-fail/deployed" ] && ! held db%2Facme%2Fshop%3Aproduction; then
  pass "GitHub lock-across-steps example: acquire --output env into \$GITHUB_ENV, deploy with the fencing token, release (also after a failed step)"
else
  fail "GitHub lock-across-steps example: statuses $rc $rc_fail; $(cat "$T/steps/job.log" "$T/steps-fail/job.log" "$T/steps/status" 2>/dev/null)"
fi

gitlab=(GITLAB_CI=true CI_PROJECT_PATH=acme/shop)
# before_script installs curl with apt-get: curl is here, so apt-get is a stub.
mkdir -p "$T/stub"
printf '#!/bin/sh\necho "apt-get $*" >>%q\n' "$T/apt-get.log" >"$T/stub/apt-get"
chmod +x "$T/stub/apt-get"
run_job 3 "$T/gl" "${gitlab[@]}" CI_ENVIRONMENT_NAME=review/feature-x \
  CI_JOB_URL=https://gitlab.com/acme/shop/-/jobs/77 PATH="$T/stub:$PATH" BATON_CACHE_DIR="$T/gl/cache"
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$T/gl/deployed")" = "acme/shop/review/feature-x" ] &&
  grep -q '"owner":"https://gitlab.com/acme/shop/-/jobs/77"' "$T/gl/status" &&
  grep -q "apt-get install" "$T/apt-get.log" && cmp -s "$T/gl/with-lock" "$ROOT/scripts/with-lock"; then
  pass "GitLab CI example: the launcher deploys under 'acme/shop/review/feature-x', owner is the job URL"
else
  fail "GitLab CI example: status $rc; $(cat "$T/gl/job.log" "$T/gl/status" 2>/dev/null)"
fi

# The GitLab deploy queue: pipeline 1 deploys, 2 queues, 3 replaces 2; each
# releases in after_script.
glq() { # DIR JOB
  run_job 4 "$1" "${gitlab[@]}" CI_ENVIRONMENT_NAME=production \
    CI_JOB_URL="https://gitlab.com/acme/shop/-/jobs/$2" PATH="$T/stub:$PATH"
}
DEPLOY_UNTIL="$T/q1.done" glq "$T/q1" 1 &
p1=$!
for _ in $(seq 600); do [ -e "$T/q1/deployed" ] && break; sleep 0.1; done
glq "$T/q2" 2 &
p2=$!
waiting_on acme%2Fshop%3Aproduction
glq "$T/q3" 3 &
p3=$!
wait "$p2"; r2=$?
touch "$T/q1.done"
wait "$p1"; r1=$?
wait "$p3"; r3=$?
if [ "$r1$r2$r3" = 000 ] && [ "$(cat "$T/q1/deployed")" = "acme/shop:production" ] && [ ! -e "$T/q2/deployed" ] &&
  [ -e "$T/q3/deployed" ] && grep -q "superseded by a newer pipeline" "$T/q2/job.log" &&
  grep -q '"owner":"https://gitlab.com/acme/shop/-/jobs/3"' "$T/q3/status" &&
  ! held acme%2Fshop%3Aproduction; then
  pass "GitLab deploy-queue example: newest wins, the replaced pipeline ends green, after_script releases"
else
  fail "GitLab deploy-queue example: statuses $r1 $r2 $r3; $(cat "$T"/q*/job.log)"
fi
# A freeze check (GitHub, then GitLab): frozen, the job ends green without
# deploying; unfrozen, it deploys.
freeze() { # NAME: freezes NAME for a day; prints the freeze's id
  curl -sS -X POST "$BATON_URL/freezes" -d "{\"match\": \"$1\", \"reason\": \"release weekend\", \
    \"until\": \"$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)\"}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'
}
freezes=("$(freeze deploy/acme/shop:production)" "$(freeze acme/shop:production)")
run_job 7 "$T/fz-gh" "${github[@]}" GITHUB_RUN_ID=301
r1=$?
run_job 8 "$T/fz-gl" "${gitlab[@]}" CI_JOB_URL=https://gitlab.com/acme/shop/-/jobs/301 PATH="$T/stub:$PATH"
r2=$?
for id in "${freezes[@]}"; do curl -sS -X DELETE "$BATON_URL/freezes/$id" >/dev/null; done
run_job 7 "$T/fz-gh2" "${github[@]}" GITHUB_RUN_ID=302
r3=$?
run_job 8 "$T/fz-gl2" "${gitlab[@]}" CI_JOB_URL=https://gitlab.com/acme/shop/-/jobs/302 PATH="$T/stub:$PATH"
r4=$?
if [ "$r1$r2$r3$r4" = 0000 ] && [ ! -e "$T/fz-gh/deployed" ] && [ ! -e "$T/fz-gl/deployed" ] &&
  grep -q "production is frozen: not deploying" "$T/fz-gh/job.log" &&
  grep -q "release weekend" "$T/fz-gl/job.log" &&
  [ "$(cat "$T/fz-gh2/deployed")" = "deploy/acme/shop:production" ] &&
  [ "$(cat "$T/fz-gl2/deployed")" = "acme/shop:production" ]; then
  pass "freeze-check examples: frozen, the job ends green without deploying; unfrozen, it deploys"
else
  fail "freeze-check examples: statuses $r1 $r2 $r3 $r4; $(cat "$T"/fz-*/job.log)"
fi

# A claim of a lock and two of three permits (GitHub, then GitLab).
run_job 9 "$T/claim-gh" "${github[@]}" GITHUB_RUN_ID=401
r1=$?
run_job 10 "$T/claim-gl" "${gitlab[@]}" CI_JOB_URL=https://gitlab.com/acme/shop/-/jobs/401 PATH="$T/stub:$PATH"
r2=$?
if [ "$r1$r2" = 00 ] && grep -qx e2e "$T/claim-gh/args" && grep -qx e2e "$T/claim-gl/args" &&
  ! held deploy%2Facme%2Fshop%3Astaging && ! held acme%2Fshop%3Astaging &&
  curl -sS "$BATON_URL/semaphores/test-envs" | grep -q '"holders":0'; then
  pass "claim examples: a lock and two permits of test-envs, all released after"
else
  fail "claim examples: statuses $r1 $r2; $(cat "$T"/claim-*/job.log)"
fi

# A place in line across steps: enqueue, build, run from the ticket, leave
# (66 once collected), while another job holds production for a moment.
run_job 11 "$T/ticket" "${github[@]}" GITHUB_RUN_ID=501
rc=$?
if [ "$rc" = 0 ] && grep -q '^BATON_TICKET=' "$T/ticket/github_env" &&
  [ "$(cat "$T/ticket/args")" = production ] && ! held deploy%2Facme%2Fshop%3Aproduction; then
  pass "ticket example: enqueue into \$GITHUB_ENV, build, deploy from that place, leave"
else
  fail "ticket example: status $rc; $(cat "$T/ticket/job.log")"
fi
finish
