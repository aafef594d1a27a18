#!/usr/bin/env bash
# The README's curl session, run verbatim (only the address changed) against a
# real service, with its output checked.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
start_stack

# The first ```sh block after the heading "## A session with curl".
session=$(awk '/^## A session with curl/ {found=1} found && /^```sh$/ {inblock=1; next}
               inblock && /^```$/ {exit} inblock {print}' "$ROOT/README.md")
[ -n "$session" ] || { fail "README has a curl session"; finish; exit 1; }
session=${session//BATON=http:\/\/127.0.0.1:8080/BATON=$BATON_URL}

out=$(cd "$TEST_TMP" && bash -c "$session" 2>&1)
printf '    %s\n' "${out//$'\n'/$'\n'    }"

check() { if grep -q -- "$2" <<<"$out"; then pass "$1"; else fail "$1 (no '$2')"; fi; }
check "alice acquires" '"owner":"alice","fencing_token"'
check "status shows the holder" '"held":true,"mode":"exclusive","owner":"alice"'
check "bob is refused after waiting" '"type":"/problems/lock-held"'
check "alice refreshes" '"ttl_ms":120000'
check "alice releases" 'release: 204'
check "bob was woken and holds it" '"held":true,"mode":"exclusive","owner":"bob"'
check "two semaphore slots, then full" '"type":"/problems/semaphore-full"'
check "semaphore status lists two holders" '"holders":2'
check "two readers hold the shared lock" '"owner":"reader-2",.*"shared":true'
check "a writer is refused beside the readers" '"type":"/problems/lock-held".*"mode":"shared","holders":2'
check "the shared lock's status lists both readers" '"held":true,"mode":"shared","holders":2,"leases":\[{"owner":"reader-1",[^]]*"shared":true},{"owner":"reader-2",[^]]*"shared":true}\]'
check "a lease takes 6 permits of 8" '"limit":8,"permits":6'
check "4 more permits are refused" '"type":"/problems/semaphore-full".*"used":6,"limit":8'
check "the semaphore's status counts permits" '"holders":1,"used":6,"limit":8,"leases":\[{"owner":"big-build",[^]]*"permits":6}'
check "a claim is refused whole, naming the name in its way" '"type":"/problems/claim-refused".*"names":\["deploy-prod"\]'
check "the refused claim left db free" '"name":"db","held":false'
check "a claim holds every name" '"leases":\[{"name":"db",.*"name":"migrations",.*"limit":3'
if grep -q '"id"' <<<"$(grep '"held"' <<<"$out")"; then
  fail "status shows a lease id"
else
  pass "status never shows a lease id"
fi
finish
