#!/usr/bin/env bash
# Runs each libFuzzer target of tests/fuzz for a while: scripts/fuzz.sh BUILD_DIR SECONDS TARGET...
# The targets run side by side, FUZZ_JOBS at a time (default: the number of cores), each for
# SECONDS. The committed seed corpus (tests/fuzz/corpus/<target>, read only) runs first, so
# every crash input once added there stays a regression test; new inputs go to
# BUILD_DIR/corpus. A crash leaves its input in BUILD_DIR/crashes/ and fails the run. A table
# comes last.
set -uo pipefail
build="$1"
seconds="$2"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${FUZZ_JOBS:-$(nproc)}"

# One target; its table row goes to BUILD_DIR/<target>.row, its exit status is the fuzzer's.
fuzz_one() {
  local target="$1"
  local binary="$build/bin/${target}_fuzz"
  local seeds="$here/tests/fuzz/corpus/$target"
  local work="$build/corpus/$target"
  local crashes="$build/crashes"
  mkdir -p "$work" "$crashes"
  local dict="$here/tests/fuzz/json.dict"
  [[ "$target" == http_reader ]] && dict="$here/tests/fuzz/http.dict"
  local log="$build/$target.log"
  local start
  start=$(date +%s)
  "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -dict="$dict" -artifact_prefix="$crashes/$target-" \
    "$work" "$seeds" >"$log" 2>&1
  local rc=$?
  local took=$(($(date +%s) - start))
  local runs cov result
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  if ((rc == 0)); then
    result=ok
  else
    result="FAILED (rc $rc, see $log)"
    grep -E "ERROR: |SUMMARY: |Test unit written" "$log" | head -5
  fi
  printf '%-20s %8ss %12s runs %8s edges   %s\n' "$target" "$took" "$runs" "$cov" "$result" \
    >"$build/$target.row"
  return "$rc"
}

failed=0
running=0
for target in "$@"; do
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
echo
echo "fuzz targets (${seconds} s each, ${jobs} at a time):"
for target in "$@"; do
  sed 's/^/  /' "$build/$target.row"
done
exit "$failed"
