#!/usr/bin/env bash
# docs/recipes.md, each ```sh block run as it stands against a real service,
# with what it prints checked.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
start_stack

# The first ```sh block after the heading "## $1", run with BATON set.
run_recipe() {
  local block
  block=$(awk -v heading="## $1" '$0 == heading {found=1; next}
           found && /^```sh$/ {inblock=1; next}
           inblock && /^```$/ {exit} inblock {print}' "$ROOT/docs/recipes.md")
  if [ -z "$block" ]; then
    echo "no recipe '$1'"
    return 1
  fi
  (cd "$TEST_TMP" && BATON=$BATON_URL bash -c "$block" 2>&1)
}

show() { printf '    %s\n' "${1//$'\n'/$'\n'    }"; }

out=$(run_recipe "One deploy at a time")
show "$out"
order=$(grep -oE '^(start|end) v[12]' <<<"$out" | awk '{print $1}' | tr '\n' ' ')
if [ "$order" = "start end start end " ]; then
  pass "deploys do not overlap"
else
  fail "deploys overlap or did not run: $order"
fi
tokens=$(sed -n 's/.*fencing token \([0-9]*\).*/\1/p' <<<"$out")
if [ "$(wc -l <<<"$tokens")" -eq 2 ] && [ "$(head -1 <<<"$tokens")" -lt "$(tail -1 <<<"$tokens")" ]; then
  pass "the second deploy has the larger fencing token"
else
  fail "fencing tokens: $tokens"
fi

out=$(run_recipe "A cron job on one host at a time")
show "$out"
if [ "$(grep -c 'running the report' <<<"$out")" -eq 1 ] && [ "$(grep -c 'skipped' <<<"$out")" -eq 2 ]; then
  pass "one host runs the job, the others skip"
else
  fail "cron recipe"
fi

out=$(run_recipe "At most N workers")
show "$out"
max=$(awk '/^\+ worker/ {n++; if (n > max) max = n} /^- worker/ {n--} END {print max + 0}' <<<"$out")
ran=$(grep -c '^- worker' <<<"$out")
if [ "$max" -eq 2 ] && [ "$ran" -eq 6 ]; then
  pass "six workers ran, at most two at once"
else
  fail "workers: $ran ran, at most $max at once"
fi

out=$(run_recipe "The cache-stampede guard")
show "$out"
if [ "$(grep -c 'rebuilt: fresh price' <<<"$out")" -eq 1 ] \
  && [ "$(grep -c 'waited, read: fresh price' <<<"$out")" -eq 3 ]; then
  pass "one reader rebuilds, the others wait and read the fresh value"
else
  fail "cache-stampede guard"
fi
finish
