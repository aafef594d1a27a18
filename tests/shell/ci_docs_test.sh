#!/usr/bin/env bash
# The CI examples of docs/ci.md, run as their CI systems would run them: the
# shell lines of each job (GitHub `run: |` blocks, GitLab `script:` items), in a
# fresh directory with a stub deploy.sh, the CI variables simulated, and
# with-lock fetched from the service as the examples do.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
start_stack

DOC="$ROOT/docs/ci.md"
# The shell lines of the N-th yaml block of docs/ci.md.
job_script() {
  python3 - "$DOC" "$1" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
block = re.findall(r"```yaml\n(.*?)```", text, re.S)[int(sys.argv[2])]
out, lines, i = [], block.splitlines(), 0
while i < len(lines):
    m = re.match(r"^(\s*)(?:- )?(run: \||script:|before_script:)$", lines[i])
    i += 1
    if not m:
        continue
    indent = len(m.group(1))
    while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
        line = lines[i].strip()
        i += 1
        if m.group(2) == "run: |":
            out.append(line)
        elif line.startswith("- "):
            out.append(line[2:])
print("\n".join(out))
EOF
}

# Runs the N-th yaml block as a job in a new directory with ENV...; the job's
# deploy.sh records the lock name and the owner the service shows meanwhile.
run_job() { # N DIR ENV...
  local n=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  cat >"$dir/deploy.sh" <<'EOF'
#!/bin/sh
printf '%s\n' "$BATON_LOCK_NAME" >deployed
curl -sS "$BATON_URL/locks/$(printf '%s' "$BATON_LOCK_NAME" | sed 's|/|%2F|g; s|:|%3A|g')" >status
sleep "${DEPLOY_SECONDS:-0}"
EOF
  chmod +x "$dir/deploy.sh"
  job_script "$n" >"$dir/job.sh"
  # A job that has not ended within 2 minutes has hung: it fails.
  (cd "$dir" && env -u GITHUB_ACTIONS -u GITLAB_CI -u JENKINS_URL -u BUILDKITE "$@" \
    BATON_URL="$BATON_URL" timeout -k 5 120 bash -e job.sh >job.log 2>&1)
}

github=(GITHUB_ACTIONS=true GITHUB_SERVER_URL=https://github.com GITHUB_REPOSITORY=acme/shop)
T=$TEST_TMP/ci

run_job 0 "$T/gh" "${github[@]}" GITHUB_RUN_ID=101
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$T/gh/deployed")" = "deploy/acme/shop:production" ] &&
  grep -q '"owner":"https://github.com/acme/shop/actions/runs/101"' "$T/gh/status" &&
  cmp -s "$T/gh/with-lock" "$ROOT/scripts/with-lock"; then
  pass "GitHub Actions example: fetches with-lock, deploys under 'deploy/acme/shop:production', owner is the run URL"
else
  fail "GitHub Actions example: status $rc; $(cat "$T/gh/job.log" "$T/gh/status" 2>/dev/null)"
fi

gitlab=(GITLAB_CI=true CI_PROJECT_PATH=acme/shop CI_ENVIRONMENT_NAME=review/feature-x
  CI_JOB_URL=https://gitlab.com/acme/shop/-/jobs/77)
# before_script installs curl with apt-get: curl is here, so apt-get is a stub.
mkdir -p "$T/stub"
printf '#!/bin/sh\necho "apt-get $*" >>%q\n' "$T/apt-get.log" >"$T/stub/apt-get"
chmod +x "$T/stub/apt-get"
run_job 2 "$T/gl" "${gitlab[@]}" PATH="$T/stub:$PATH"
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$T/gl/deployed")" = "acme/shop/review/feature-x" ] &&
  grep -q '"owner":"https://gitlab.com/acme/shop/-/jobs/77"' "$T/gl/status" &&
  grep -q "apt-get install" "$T/apt-get.log"; then
  pass "GitLab CI example: deploys under 'acme/shop/review/feature-x', owner is the job URL"
else
  fail "GitLab CI example: status $rc; $(cat "$T/gl/job.log" "$T/gl/status" 2>/dev/null)"
fi

# Newest wins: while run 1 deploys, runs 2 and 3 queue; 3 replaces 2, which
# ends green without deploying; 3 deploys after 1.
if curl -sS "$BATON_URL/openapi.json" | grep -q '"newest_wins"'; then
  DEPLOY_SECONDS=4 run_job 1 "$T/n1" "${github[@]}" GITHUB_RUN_ID=1 &
  p1=$!
  for _ in $(seq 300); do [ -e "$T/n1/deployed" ] && break; sleep 0.1; done
  run_job 1 "$T/n2" "${github[@]}" GITHUB_RUN_ID=2 &
  p2=$!
  # Run 3 comes once run 2 waits in line.
  for _ in $(seq 100); do
    curl -sS "$BATON_URL/locks/deploy%2Facme%2Fshop%3Astaging" | grep -q '"waiting":1' && break
    sleep 0.1
  done
  run_job 1 "$T/n3" "${github[@]}" GITHUB_RUN_ID=3 &
  p3=$!
  wait "$p1"; r1=$?
  wait "$p2"; r2=$?
  wait "$p3"; r3=$?
  if [ "$r1$r2$r3" = 000 ] && [ -e "$T/n1/deployed" ] && [ ! -e "$T/n2/deployed" ] &&
    [ -e "$T/n3/deployed" ] && grep -q "superseded by a newer run" "$T/n2/job.log"; then
    pass "--newest-wins example: the superseded run ends green without deploying; the newest deploys"
  else
    fail "--newest-wins example: statuses $r1 $r2 $r3; $(cat "$T"/n*/job.log)"
  fi
else
  echo "skip - --newest-wins example (the service has no newest_wins)"
fi
finish
