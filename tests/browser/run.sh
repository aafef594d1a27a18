#!/usr/bin/env bash
# Swagger UI in headless Chromium: /docs loads from the service alone (every
# request the page makes goes to the service's own origin, none fails), and
# "Try it out" + "Execute" on POST /locks/{name} answers 201 and really takes
# the lock. Installs what is missing: Debian's chromium, and playwright-core
# from the npm registry into tests/browser/node_modules (it never downloads a
# browser of its own). Screenshots go to tests/browser/artifacts/.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
# Ctrl-C or SIGTERM: exit, so the EXIT trap stops everything started.
trap 'exit 130' INT TERM

CHROMIUM=/usr/bin/chromium

# Installs playwright-core as locked in package-lock.json, unless it is there.
ensure_playwright() {
  local want have
  want=$(cd "$HERE" && node -p "require('./package-lock.json').packages['node_modules/playwright-core'].version")
  have=""
  if [ -f "$HERE/node_modules/playwright-core/package.json" ]; then
    have=$(cd "$HERE" && node -p "require('./node_modules/playwright-core/package.json').version")
  fi
  [ "$want" = "$have" ] && return 0
  echo "installing playwright-core $want" >&2
  (cd "$HERE" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
}

setup() {
  [ -x "$CHROMIUM" ] || ensure_packages chromium
  command -v npm >/dev/null 2>&1 || ensure_packages nodejs npm
  ensure_playwright
  start_stack BATON_KEY_PREFIX=browser-test:
}

if ! setup; then
  fail "setup: chromium, playwright-core, redis-server and baton"
  [ -f "$TEST_TMP/baton.log" ] && tail -n 20 "$TEST_TMP/baton.log"
  finish
  exit 1
fi

mkdir -p "$HERE/artifacts"
status=0
(cd "$HERE" && exec env TMPDIR="$TEST_TMP" CHROMIUM="$CHROMIUM" SCREENSHOT="$HERE/artifacts/swagger-ui.png" \
  node swagger_ui.test.js) &
TRACKED_PIDS+=("$!")
wait "$!" || status=$?
echo "screenshots: $HERE/artifacts/swagger-ui*.png (direct and behind a proxy)"
# The dashboard, on a service of its own (with API tokens).
bash "$HERE/dashboard.sh" || status=1
if [ "$status" -ne 0 ] && [ -f "$TEST_TMP/baton.log" ]; then
  echo "--- baton log (last lines)"
  tail -n 20 "$TEST_TMP/baton.log"
fi
exit "$status"
