#!/usr/bin/env bash
# The committed OpenAPI document passes `redocly lint` (npm @redocly/cli, as
# locked in package-lock.json, installed into tests/openapi/node_modules) with
# 0 errors and 0 warnings; the only problems ignored (.redocly.lint-ignore.yaml)
# are the 4xx rule of open GETs that take no input. And the document says what readers need:
# date-time formats, every problem type, a server, acquire first.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
trap 'exit 130' INT TERM

ensure_redocly() {
  local want have=""
  want=$(cd "$HERE" && node -p "require('./package-lock.json').packages['node_modules/@redocly/cli'].version")
  if [ -f "$HERE/node_modules/@redocly/cli/package.json" ]; then
    have=$(cd "$HERE" && node -p "require('./node_modules/@redocly/cli/package.json').version")
  fi
  [ "$want" = "$have" ] && return 0
  echo "installing @redocly/cli $want" >&2
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
}

if ! { command -v npm >/dev/null 2>&1 || ensure_packages nodejs npm; } || ! ensure_redocly; then
  fail "setup: node, npm and @redocly/cli"
  finish
  exit 1
fi

status=0
report=$(cd "$HERE" && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
  node_modules/.bin/redocly lint ../../openapi/openapi.json --format=stylish 2>&1) || status=$?
problems=$(printf '%s\n' "$report" | grep -E '^ +[0-9]+:[0-9]+ +(error|warning) ' || true)
if [ "$status" -eq 0 ] && [ -z "$problems" ] && printf '%s' "$report" | grep -q 'Your API description is valid'; then
  pass "redocly lint: 0 errors, 0 warnings"
else
  fail "redocly lint (exit $status): ${problems:-$report}"
fi
# Each ignored problem is the 4xx rule of an open GET that takes no input.
unjustified=$(python3 - "$HERE/.redocly.lint-ignore.yaml" "$HERE/../../openapi/openapi.json" <<'PY'
import json, re, sys
entries = re.findall(r"^ +- '#/paths/(.+)/get/responses'$", open(sys.argv[1]).read(), re.M)
total = len(re.findall(r"^ +- ", open(sys.argv[1]).read(), re.M))
doc = json.load(open(sys.argv[2]))
bad = [] if entries and len(entries) == total else ["an entry that is not a GET's responses"]
for entry in entries:
    path = entry.replace("~1", "/")
    op = doc["paths"].get(path, {}).get("get")
    if op is None or op.get("security") != [{}] or op.get("parameters") or op.get("requestBody"):
        bad.append(path)
print(" ".join(bad))
PY
)
if [ -z "$unjustified" ]; then
  pass "only the 4xx rule of open GETs without input is ignored"
else
  fail "ignored without reason: $unjustified"
fi

verdict=$(python3 - "$HERE/../../openapi/openapi.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = []
schemas = doc["components"]["schemas"]
for name, schema in schemas.items():
    expires = schema.get("properties", {}).get("expires_at")
    if expires is not None and expires.get("format") != "date-time":
        bad.append(f"{name}.expires_at has no date-time format")
if not any("expires_at" in s.get("properties", {}) for s in schemas.values()):
    bad.append("no expires_at at all")
kinds = schemas["Problem"]["properties"]["type"].get("enum", [])
for slug in ["invalid-request", "unauthorized", "lock-held", "semaphore-full", "redis-unavailable", "lease-not-found"]:
    if f"/problems/{slug}" not in kinds:
        bad.append(f"problem type {slug} is not listed")
if not doc.get("servers"):
    bad.append("no servers")
for tag in ("locks", "semaphores"):
    ops = [(m, p) for p, item in doc["paths"].items() for m, op in item.items() if tag in op.get("tags", [])]
    if not ops or ops[0] != ("post", f"/{tag}/{{name}}"):
        bad.append(f"first {tag} operation is {ops[:1]}, not the acquire")
print("; ".join(bad) or "ok")
PY
)
if [ "$verdict" = ok ]; then
  pass "date-time formats, every problem type, a server, acquire first in its group"
else
  fail "document: $verdict"
fi
finish
