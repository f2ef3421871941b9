#!/usr/bin/env bash
# `make test` (and so CI, .ci/run): every stage in turn, each one a make target, with the time
# each took. A line marks the start of each stage with the time since the start, so a log cut
# short (CI's time limit) still says where the time went; the table comes last.
#   scripts/test-all.sh [stage ...]   default: the stages below, in this order
set -uo pipefail
cd "$(dirname "$0")/.."

stages=("$@")
if ((${#stages[@]} == 0)); then
  stages=(build lint tidy-ci unit-test tsan-test asan-test py-test hostile fuzz)
fi

start=$SECONDS
names=()
took=()
result=()
table() {
  printf '\n%-12s %8s  %s\n' "stage" "seconds" "result"
  for i in "${!names[@]}"; do
    printf '%-12s %8d  %s\n' "${names[$i]}" "${took[$i]}" "${result[$i]}"
  done
  printf '%-12s %8d\n' "total" $((SECONDS - start))
}

for stage in "${stages[@]}"; do
  echo "== make test: ${stage} starts at +$((SECONDS - start)) s"
  t0=$SECONDS
  make --no-print-directory "$stage"
  rc=$?
  names+=("$stage")
  took+=($((SECONDS - t0)))
  if ((rc != 0)); then
    result+=("FAILED (exit $rc)")
    table
    exit "$rc"
  fi
  result+=("ok")
done
table
