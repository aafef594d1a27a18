#!/usr/bin/env bash
# The dashboard (GET /) in headless Chromium, on a service with API tokens: it
# asks for a token, loads from the service alone, and shows a lock taken,
# queued for and released through the API within 1 s each, without a reload.
# Needs what run.sh installs (chromium, playwright-core); run.sh calls it.
# Screenshots go to tests/browser/artifacts/dashboard*.png.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../shell/lib.sh disable=SC1091
. "$HERE/../shell/lib.sh"
trap 'exit 130' INT TERM

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
TOKEN="dashboard-$RANDOM-$RANDOM"

if ! start_stack BATON_KEY_PREFIX=dashboard-test: BATON_API_TOKENS="$TOKEN"; then
  fail "setup: redis-server and baton"
  [ -f "$TEST_TMP/baton.log" ] && tail -n 20 "$TEST_TMP/baton.log"
  finish
  exit 1
fi

mkdir -p "$HERE/artifacts"
status=0
(cd "$HERE" && exec env TMPDIR="$TEST_TMP" CHROMIUM="$CHROMIUM" BATON_TOKEN="$TOKEN" \
  SCREENSHOT="$HERE/artifacts/dashboard.png" node dashboard.test.js) &
TRACKED_PIDS+=("$!")
wait "$!" || status=$?
echo "screenshots: $HERE/artifacts/dashboard.png, $HERE/artifacts/dashboard-after.png"
if [ "$status" -ne 0 ] && [ -f "$TEST_TMP/baton.log" ]; then
  echo "--- baton log (last lines)"
  tail -n 20 "$TEST_TMP/baton.log"
fi
exit "$status"
