#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD/fuzz for SECONDS each (make fuzz; CI: 20 s each), one a
# core at a time (GPT_TEST_JOBS, else the cores), over its seed corpus tests/fuzz/corpus/NAME
# (read only: new inputs go to a temp dir); the results in the targets' order.
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
jobs=${GPT_TEST_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)}
res=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$res"' EXIT
# fuzz_one NAME: its report in $res/NAME.report, its exit status in $res/NAME.rc
fuzz_one() {
  local name=$1 bin="$build/fuzz/fuzz_$1" work start rc runs dict=()
  work=$(mktemp -d)
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  start=$(date +%s)
  "$bin" "$work" "tests/fuzz/corpus/$name" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz/$name-" >"$work/.log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/.log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    printf 'fuzz %-22s %8s runs in %ss\n' "$name" "${runs:-?}" "$(( $(date +%s) - start ))"
  else
    echo "FAIL fuzz $name (exit $rc):"
    grep -E 'ERROR|SUMMARY|property failed|Test unit written|^ *#[0-9]+ ' "$work/.log" | head -n 40 | sed 's/^/  /'
    echo "  replay it: build/tests/test_fuzz_$name FILE; keep it: copy FILE into tests/fuzz/regressions/$name/ and fix the cause"
  fi > "$res/$name.report"
  rm -rf "$work"
  echo $rc > "$res/$name.rc"
}
names=()
for bin in "$build"/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  [[ -n "$pattern" && "$name" != *$pattern* ]] && continue
  names+=("$name")
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$name" &
done
wait
for name in "${names[@]}"; do
  cat "$res/$name.report"
  [ "$(cat "$res/$name.rc" 2>/dev/null)" = 0 ] || failed+=("$name")
done
[ ${#failed[@]} -gt 0 ] && { echo "fuzz failures: ${failed[*]}"; exit 1; }
exit 0
