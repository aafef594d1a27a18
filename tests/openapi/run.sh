#!/usr/bin/env bash
# The committed OpenAPI document passes `redocly lint` (npm @redocly/cli, as
# locked in package-lock.json, installed into tests/openapi/node_modules) with
# 0 errors and 0 warnings; the only problems ignored (.redocly.lint-ignore.yaml)
# are the 4xx rule of open GETs that take no input, and paths ambiguous only
# on paper (a UUID parameter against a literal word). And the document says what readers need:
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
# Each ignored problem is the 4xx rule of an open GET that takes no input, or
# a path "ambiguous" only where one of its UUID parameters meets a literal
# segment of another path (no UUID is a word, so no request matches both).
unjustified=$(python3 - "$HERE/.redocly.lint-ignore.yaml" "$HERE/../../openapi/openapi.json" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
gets = re.findall(r"^ +- '#/paths/(.+)/get/responses'$", text, re.M)
paths = re.findall(r"^ +- '#/paths/([^/']+)'$", text, re.M)
total = len(re.findall(r"^ +- ", text, re.M))
doc = json.load(open(sys.argv[2]))
bad = [] if gets and len(gets) + len(paths) == total else ["an entry that is neither a GET's responses nor a path"]
for entry in gets:
    path = entry.replace("~1", "/")
    op = doc["paths"].get(path, {}).get("get")
    if op is None or op.get("security") != [{}] or op.get("parameters") or op.get("requestBody"):
        bad.append(path)
def uuid_params(item):
    return {p["name"] for op in item.values() if isinstance(op, dict)
            for p in op.get("parameters", []) if p.get("in") == "path" and p.get("schema", {}).get("format") == "uuid"}
for entry in paths:
    path = entry.replace("~1", "/")
    if path not in doc["paths"]:
        bad.append(path)
        continue
    uuids = uuid_params(doc["paths"][path])
    mine = path.split("/")
    for other in doc["paths"]:
        theirs = other.split("/")
        if other == path or len(theirs) != len(mine):
            continue
        param = lambda s: s.startswith("{")
        if not all(a == b or param(a) or param(b) for a, b in zip(mine, theirs)):
            continue  # not ambiguous with this one
        # Ambiguous on paper: some segment must be a UUID here and a word there.
        if not any(param(a) and a[1:-1] in uuids and not param(b) for a, b in zip(mine, theirs)):
            bad.append(f"{path} vs {other}")
print(" ".join(bad))
PY
)
if [ -z "$unjustified" ]; then
  pass "only the 4xx rule of open GETs without input, and UUID-only path ambiguities, are ignored"
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
