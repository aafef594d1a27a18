#!/usr/bin/env bash
# The one script behind the composite actions actions/run, actions/acquire
# and actions/release: `baton-action.sh run|acquire|release`.
#
# Every input comes in as an environment variable (INPUT_NAME, INPUT_COMMAND,
# ...; see each action.yml), never pasted into a script: whatever a name, an
# owner or a command holds, it is data here. The client is fetched from the
# service (GET /baton), checked against GET /baton.sha256, and cached in
# $RUNNER_TEMP for the job's later steps.
#
# Outputs go to $GITHUB_OUTPUT (fencing-token, waited-ms), one line per
# action to $GITHUB_STEP_SUMMARY, and acquire hands its lease on to later
# steps through $GITHUB_ENV (BATON_LOCK_NAME, BATON_LEASE_ID, ...).
set -uo pipefail

die() { # STATUS MESSAGE
  printf '::error::baton: %s\n' "$2"
  exit "$1"
}

now_ms() { date +%s%3N; }

# Seconds with one decimal, from milliseconds.
seconds() { printf '%d.%ds' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# Markdown code span of any text: backticks cannot end it early.
code() { printf '%s%s%s' '`' "${1//\`/\'}" '`'; }

# BATON_URL and BATON_TOKEN for the client: the inputs, else the variables
# the job already has; with `oidc-audience` and no token, the job's own
# OpenID Connect token (needs `permissions: id-token: write`).
connect() {
  BATON_URL=${INPUT_URL:-${BATON_URL:-}}
  BATON_URL=${BATON_URL%/}
  [ -n "$BATON_URL" ] || die 64 "no service: set the url input (or BATON_URL)"
  BATON_TOKEN=${INPUT_TOKEN:-${BATON_TOKEN:-}}
  if [ -z "$BATON_TOKEN" ] && [ -n "${INPUT_OIDC_AUDIENCE:-}" ]; then
    [ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] || die 77 "oidc-audience needs the job's 'permissions: id-token: write'"
    [ -n "${ACTIONS_ID_TOKEN_REQUEST_TOKEN:-}" ] ||
      die 77 "oidc-audience needs the job's 'permissions: id-token: write'"
    local answer audience
    audience=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' \
      "$INPUT_OIDC_AUDIENCE" 2>/dev/null) || audience=$INPUT_OIDC_AUDIENCE
    # The request token goes to curl on stdin, not on its command line.
    answer=$(printf 'header = "Authorization: bearer %s"\n' "$ACTIONS_ID_TOKEN_REQUEST_TOKEN" |
      curl -fsS --connect-timeout 10 --max-time 60 -K - "$ACTIONS_ID_TOKEN_REQUEST_URL&audience=$audience") ||
      die 77 "cannot get the job's OIDC token from GitHub"
    # The answer is {"count": N, "value": "<JWT>"}; a JWT has no quotes.
    BATON_TOKEN=$(printf '%s' "$answer" | sed -n 's/.*"value"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
    [ -n "$BATON_TOKEN" ] || die 77 "GitHub's OIDC answer has no token"
    echo "::add-mask::$BATON_TOKEN"
  fi
  export BATON_URL BATON_TOKEN
}

# Fetches the client into a cache of the job (once per version) and sets BIN.
fetch_client() {
  command -v curl >/dev/null || die 69 "curl is not installed"
  case $(uname -s)/$(uname -m) in
    Linux/x86_64 | Linux/amd64) ;;
    *) die 69 "$BATON_URL serves baton for Linux x86-64; this runner is $(uname -s) $(uname -m)" ;;
  esac
  local sum tmp cache
  sum=$(curl -fsS --connect-timeout 10 --max-time 60 "$BATON_URL/baton.sha256") ||
    die 69 "cannot fetch $BATON_URL/baton.sha256: is it a baton service this runner can reach?"
  sum=${sum%%[!0-9a-f]*}
  [ ${#sum} -eq 64 ] || die 69 "$BATON_URL/baton.sha256 is not a SHA-256"
  cache=${RUNNER_TEMP:-${TMPDIR:-/tmp}}/baton-client
  BIN=$cache/baton-$sum
  [ -x "$BIN" ] && return 0
  mkdir -p "$cache" || die 69 "cannot create $cache"
  tmp=$(mktemp "$cache/download.XXXXXX") || die 69 "cannot write to $cache"
  if ! curl -fsS --connect-timeout 10 --max-time 600 "$BATON_URL/baton" -o "$tmp"; then
    rm -f "$tmp"
    die 69 "cannot fetch $BATON_URL/baton"
  fi
  if [ "$(sha256sum "$tmp" | cut -d ' ' -f 1)" != "$sum" ]; then
    rm -f "$tmp"
    die 69 "$BATON_URL/baton does not match $BATON_URL/baton.sha256"
  fi
  chmod +x "$tmp" || die 69 "cannot make $tmp executable"
  mv -f "$tmp" "$BIN" || die 69 "cannot install the client in $cache"
}

# The options of `baton run` and `baton acquire` the inputs ask for, in OPTS.
lease_options() {
  OPTS=(--owner "${INPUT_OWNER:-}")
  [ -n "${INPUT_TTL:-}" ] && OPTS+=(--ttl "$INPUT_TTL")
  [ -n "${INPUT_WAIT:-}" ] && OPTS+=(--wait "$INPUT_WAIT")
  [ -n "${INPUT_PRIORITY:-}" ] && OPTS+=(--priority "$INPUT_PRIORITY")
  case ${INPUT_SHARED:-false} in
    true) OPTS+=(--shared) ;;
    false | "") ;;
    *) die 64 "shared must be true or false (got '$INPUT_SHARED')" ;;
  esac
  [ -n "${INPUT_LIMIT:-}" ] && OPTS+=(--limit "$INPUT_LIMIT")
  [ -n "${INPUT_PERMITS:-}" ] && OPTS+=(--permits "$INPUT_PERMITS")
  [ -n "${INPUT_NAME:-}" ] || die 64 "the name input is empty"
}

# What was held, for the summary: lock `x`, shared lock `x`, semaphore `x`.
what() {
  if [ -n "${INPUT_LIMIT:-}" ]; then
    printf 'semaphore %s (%s of %s permits)' "$(code "$INPUT_NAME")" "${INPUT_PERMITS:-1}" "$INPUT_LIMIT"
  elif [ "${INPUT_SHARED:-false}" = true ]; then
    printf 'shared lock %s' "$(code "$INPUT_NAME")"
  else
    printf 'lock %s' "$(code "$INPUT_NAME")"
  fi
}

summary() { printf '%s\n' "$1" >>"${GITHUB_STEP_SUMMARY:-/dev/null}"; }
output() { printf '%s=%s\n' "$1" "$2" >>"${GITHUB_OUTPUT:-/dev/null}"; }

# COMMAND's side of `baton run`: notes when it got the lease and the
# fencing token, then runs the command as GitHub runs a bash step.
child() {
  printf '%s %s\n' "$(now_ms)" "${BATON_FENCING_TOKEN:-}" >"$BATON_ACTION_STATE"
  exec bash --noprofile --norc -eo pipefail -c "$INPUT_COMMAND"
}

run() {
  [ -n "${INPUT_COMMAND:-}" ] || die 64 "the command input is empty"
  lease_options
  connect
  fetch_client
  local state status=0 started got token ended
  state=$(mktemp) || die 69 "no temporary file"
  started=$(now_ms)
  BATON_ACTION_STATE=$state "$BIN" run "${OPTS[@]}" -- "$INPUT_NAME" \
    bash "${BASH_SOURCE[0]}" child || status=$?
  ended=$(now_ms)
  read -r got token <"$state" 2>/dev/null || got=""
  rm -f "$state"
  if [ -z "$got" ]; then
    summary "$(code "$INPUT_OWNER") did not get $(what): baton exited $status"
    exit "$status"
  fi
  output fencing-token "$token"
  output waited-ms $((got - started))
  summary "$(code "$INPUT_OWNER") held $(what) (fencing token $token) for $(seconds $((ended - got))), after waiting $(seconds $((got - started))); the command exited $status"
  exit "$status"
}

acquire() {
  lease_options
  connect
  fetch_client
  local lease status=0 started got line
  started=$(now_ms)
  lease=$("$BIN" acquire "${OPTS[@]}" --output env -- "$INPUT_NAME") || status=$?
  got=$(now_ms)
  if [ "$status" -ne 0 ]; then
    summary "$(code "$INPUT_OWNER") did not get $(what): baton exited $status"
    exit "$status"
  fi
  while IFS= read -r line; do
    # The lease id is a secret: masked in the log from here on.
    case $line in BATON_LEASE_ID=*) echo "::add-mask::${line#BATON_LEASE_ID=}" ;; esac
    case $line in BATON_FENCING_TOKEN=*) output fencing-token "${line#BATON_FENCING_TOKEN=}" ;; esac
  done <<<"$lease"
  output waited-ms $((got - started))
  {
    printf '%s\n' "$lease"
    echo "BATON_URL=$BATON_URL"
    echo "BATON_ACTION_OWNER=$INPUT_OWNER"
    echo "BATON_ACTION_WHAT=$(what)"
    echo "BATON_ACTION_ACQUIRED_MS=$got"
    echo "BATON_ACTION_WAITED_MS=$((got - started))"
  } >>"${GITHUB_ENV:-/dev/null}"
  echo "baton: acquired $(what) after $(seconds $((got - started)))"
}

release() {
  if [ -z "${BATON_LEASE_ID:-}" ]; then
    echo "baton: no lease to release (BATON_LEASE_ID is empty: nothing was acquired)"
    exit 0
  fi
  connect
  fetch_client
  local status=0 ended
  "$BIN" release || status=$?
  ended=$(now_ms)
  if [ -n "${BATON_ACTION_ACQUIRED_MS:-}" ]; then
    summary "$(code "${BATON_ACTION_OWNER:-}") held ${BATON_ACTION_WHAT:-$(code "$BATON_LOCK_NAME")} (fencing token ${BATON_FENCING_TOKEN:-?}) for $(seconds $((ended - BATON_ACTION_ACQUIRED_MS))), after waiting $(seconds "${BATON_ACTION_WAITED_MS:-0}"); release exited $status"
  fi
  # Later steps see no lease: a second release has nothing to do.
  printf 'BATON_LEASE_ID=\n' >>"${GITHUB_ENV:-/dev/null}"
  exit "$status"
}

case ${1:-} in
  run | acquire | release | child) "$1" ;;
  *) die 64 "usage: baton-action.sh run|acquire|release" ;;
esac
