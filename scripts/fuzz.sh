#!/usr/bin/env bash
# Runs each libFuzzer target of tests/fuzz for a while: scripts/fuzz.sh BUILD_DIR SECONDS TARGET...
# The committed seed corpus (tests/fuzz/corpus/<target>, read only) runs first, so every
# crash input once added there stays a regression test; new inputs go to BUILD_DIR/corpus.
# A crash leaves its input in BUILD_DIR/crashes/ and fails the run. A table comes last.
set -uo pipefail
build="$1"
seconds="$2"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
failed=0
table=()
for target in "$@"; do
  binary="$build/bin/${target}_fuzz"
  seeds="$here/tests/fuzz/corpus/$target"
  work="$build/corpus/$target"
  crashes="$build/crashes"
  mkdir -p "$work" "$crashes"
  dict="$here/tests/fuzz/json.dict"
  [[ "$target" == http_reader ]] && dict="$here/tests/fuzz/http.dict"
  log="$build/$target.log"
  start=$(date +%s)
  "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -dict="$dict" -artifact_prefix="$crashes/$target-" \
    "$work" "$seeds" >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  if ((rc == 0)); then
    result=ok
  else
    result="FAILED (rc $rc, see $log)"
    failed=1
    grep -E "ERROR: |SUMMARY: |Test unit written" "$log" | head -5
  fi
  table+=("$(printf '%-20s %8ss %12s runs %8s edges   %s' "$target" "$took" "$runs" "$cov" "$result")")
done
echo
echo "fuzz targets (${seconds} s each):"
printf '  %s\n' "${table[@]}"
exit "$failed"
