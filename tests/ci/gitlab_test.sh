# shellcheck shell=bash disable=SC2016 # single quotes: text for the job's shell
# The GitLab CI/CD component's part of tests/ci/run.sh (sourced by it, with
# its stack, helpers and $MARKS): two pipelines' jobs on one name, a name
# that would run commands if pasted, and the job's ID token sent instead of
# BATON_TOKEN.

# gitlab JOB-DIR PIPELINE-JOB-ID INPUT...: the component's job, as GitLab runs it.
gitlab() {
  local dir=$1 id=$2
  shift 2
  mkdir -p "$dir"
  local inputs=()
  for pair in "$@"; do inputs+=(--input "$pair"); done
  "$PY" "$HERE/gitlab.py" "$ROOT/templates/baton-run.yml" "$dir" \
    --env CI_PROJECT_PATH=acme/shop --env CI_JOB_URL="https://gitlab.com/acme/shop/-/jobs/$id" \
    --env BATON_URL="$BATON_URL" "${inputs[@]}" >"$dir/log" 2>&1
}
dotenv() { # DIR KEY
  sed -n "s/^$2=//p" "$1/baton.env" 2>/dev/null
}

wait_command='touch "$MARKS/$JOB.started"; while [ ! -e "$MARKS/$JOB.go" ]; do sleep 0.1; done; touch "$MARKS/$JOB.ended"'
JOB=ga BATON_TOKEN=$TOKEN gitlab "$TEST_TMP/ga" 501 name='$CI_PROJECT_PATH:production' command="$wait_command" wait=2m &
pa=$!
until_file "$MARKS/ga.started"
JOB=gb BATON_TOKEN=$TOKEN gitlab "$TEST_TMP/gb" 502 name='$CI_PROJECT_PATH:production' command="$wait_command" wait=2m &
pb=$!
lock=acme%2Fshop%3Aproduction
if waiting_on "$lock" && [ ! -e "$MARKS/gb.started" ] &&
  status_of "$lock" | grep -q '"owner":"https://gitlab.com/acme/shop/-/jobs/501"'; then
  pass "GitLab: the second job waits in line while the first holds '\$CI_PROJECT_PATH:production' (owner: the job URL)"
else
  fail "GitLab: the second job did not wait: $(status_of "$lock"); $(cat "$TEST_TMP/gb/log")"
fi
touch "$MARKS/ga.go" "$MARKS/gb.go"
wait "$pa"; ra=$?
wait "$pb"; rb=$?
ta=$(dotenv "$TEST_TMP/ga" BATON_FENCING_TOKEN) tb=$(dotenv "$TEST_TMP/gb" BATON_FENCING_TOKEN)
wb=$(dotenv "$TEST_TMP/gb" BATON_WAITED_MS)
if [ "$ra$rb" = 00 ] && [ "$MARKS/gb.started" -nt "$MARKS/ga.ended" ] && [[ $ta =~ ^[0-9]+$ ]] &&
  [[ $tb =~ ^[0-9]+$ ]] && [ "$tb" -gt "$ta" ] && [[ $wb =~ ^[0-9]+$ ]] && [ "$wb" -gt 0 ] &&
  grep -qx "baton: https://gitlab.com/acme/shop/-/jobs/502 held 'acme/shop:production' (fencing token $tb) for [0-9]*s, after waiting [0-9]*s; the command exited 0" "$TEST_TMP/gb/log" &&
  ! status_of "$lock" | grep -q '"held":true'; then
  pass "GitLab: both ran in turn; the dotenv report has BATON_FENCING_TOKEN ($ta < $tb) and BATON_WAITED_MS; one line in the log"
else
  fail "GitLab: statuses $ra $rb, tokens '$ta' '$tb' waited '$wb'; $(cat "$TEST_TMP/ga/log" "$TEST_TMP/gb/log")"
fi

# A name that would run commands if it were pasted into the script.
evil="it's \"q\" \$(touch $MARKS/gl-injected) \`touch $MARKS/gl-injected2\`; touch $MARKS/gl-injected3"
BATON_TOKEN=$TOKEN gitlab "$TEST_TMP/gevil" 503 name="$evil" owner="$evil" \
  command='printf "%s" "$BATON_LOCK_NAME" > "$MARKS/gl-evil.name"'
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$MARKS/gl-evil.name" 2>/dev/null)" = "$evil" ] &&
  [ ! -e "$MARKS/gl-injected" ] && [ ! -e "$MARKS/gl-injected2" ] && [ ! -e "$MARKS/gl-injected3" ]; then
  pass "GitLab: a name and an owner with quotes, \$(...), backticks and ';' are data: nothing injected runs"
else
  fail "GitLab: injection check: status $rc; $(ls "$MARKS"); $(cat "$TEST_TMP/gevil/log")"
fi

# The job's ID token (id_tokens) instead of a stored BATON_TOKEN.
BATON_TOKEN="" BATON_ID_TOKEN=$TOKEN gitlab "$TEST_TMP/gid" 504 name=oidc-gitlab \
  command='true' id-token=BATON_ID_TOKEN
rc=$?
BATON_TOKEN="" BATON_ID_TOKEN=wrong-token-000000 gitlab "$TEST_TMP/gid-wrong" 505 name=oidc-gitlab \
  command='touch "$MARKS/gl-wrong-ran"' id-token=BATON_ID_TOKEN
rc_wrong=$?
if [ "$rc" = 0 ] && [ "$rc_wrong" = 77 ] && [ ! -e "$MARKS/gl-wrong-ran" ]; then
  pass "GitLab: id-token sends the job's ID token as the bearer token (a wrong one: 77, nothing runs)"
else
  fail "GitLab: id-token: statuses $rc $rc_wrong; $(cat "$TEST_TMP/gid/log" "$TEST_TMP/gid-wrong/log")"
fi
