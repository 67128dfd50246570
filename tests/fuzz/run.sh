#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD/fuzz for SECONDS each (make fuzz; CI: 20 s each), in
# turn, over its seed corpus tests/fuzz/corpus/NAME (read only: new inputs go to a temp dir).
# A crash, leak, timeout or failed property: the input is saved as BUILD/fuzz/NAME-crash-* (or -leak-, -timeout-),
# and the line says how to make it a regression that `make test` replays. Exits 1 if any did.
# Usage: tests/fuzz/run.sh BUILD SECONDS [PATTERN]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build-fuzz}" && pwd)
seconds=${2:-60}
pattern=${3:-}
export GPT_TEST_DATA=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" 2>/dev/null && pwd || echo /nonexistent)
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
cd "$top"
for bin in "$build"/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  [[ -n "$pattern" && "$name" != *$pattern* ]] && continue
  work=$(mktemp -d)
  dict=(); [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  start=$(date +%s)
  "$bin" "$work" "tests/fuzz/corpus/$name" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz/$name-" >"$work/.log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/.log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    printf 'fuzz %-22s %8s runs in %ss\n' "$name" "${runs:-?}" "$(( $(date +%s) - start ))"
  else
    failed+=("$name")
    echo "FAIL fuzz $name (exit $rc):"
    grep -E 'ERROR|SUMMARY|property failed|Test unit written|^ *#[0-9]+ ' "$work/.log" | head -n 40 | sed 's/^/  /'
    echo "  replay it: build/tests/test_fuzz_$name FILE; keep it: copy FILE into tests/fuzz/regressions/$name/ and fix the cause"
  fi
  rm -rf "$work"
done
[ ${#failed[@]} -gt 0 ] && { echo "fuzz failures: ${failed[*]}"; exit 1; }
exit 0
