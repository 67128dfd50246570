#!/usr/bin/env bash
# Runs every test: the unit-test binaries in BUILD/tests and the CLI cases in tests/cli, several
# at a time. A CLI case is NAME.sh (run by bash in a fresh temp dir) with optional NAME.out /
# NAME.err (expected stdout / stderr) and NAME.code (expected exit status, default 0); exit 77 =
# skipped. Results are printed in the same order every run (unit binaries, then CLI cases, each
# by name) as soon as the tests before them are done; the slowest of the last run start first.
# Ends with the 10 slowest tests and the 10 that took most CPU (their processes' user + system
# seconds, with the sum: on a machine of few cores make test's minutes follow it), then the line
# "N passed, N failed, N skipped"; exits 1 if anything failed.
# Usage: tests/run.sh BUILD [PATTERN...]   (the tests whose names hold any PATTERN, e.g. shard,
#   and none of those given as -PATTERN)
#   jobs: GPT_TEST_JOBS, else make's -jN (MAKEFLAGS), else one more than the cores (some tests
#     wait on servers, timeouts and their children: the spare job keeps the cores busy then)
#   budget: with GPT_TEST_BUDGET=S (make test: 60), a test that takes longer than S seconds (unit
#     binaries and CLI cases alike, on a 2-core machine running 2 at a time; with more jobs
#     than cores the budget grows by jobs / cores) is named with its time (SLOW ...) beside the
#     summary: make it faster (smaller model, fewer steps, events instead of sleeps); with
#     GPT_TEST_BUDGET_FAIL=1 such a test fails.
#   hangs: a unit binary is stopped after 600 s, a CLI case after 300 s, times the jobs when
#     more than one run at a time (a test shares the cores then), times GPT_TEST_SLOWDOWN
#     (default 1; make check: 3, tsan and valgrind: 2, for the sanitizers' slowdown).
#   times: BUILD/test-times ("seconds name cpu-seconds" per line, this run's), read by the next run;
#     tests/test-times (a copy of one, refreshed now and then) where the build has none yet.
# With GPT_EXPECTED_SKIPS=FILE (CI: tests/expected-skips), the skipped tests must be exactly those
# FILE lists (of those that ran): an unexpected skip, or a listed test that ran without skipping
# or no longer exists, is a failure naming it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
shift
patterns=("$@")
pattern=${patterns[*]:-} # "" when every test runs
# picked NAME: whether NAME holds one of the patterns (any name when none is given) and none of
# the patterns written -PATTERN (make test T='ops -test_ops_paths')
picked() {
  local p any=0 want=0
  for p in "${patterns[@]}"; do
    if [[ "$p" == -* ]]; then [[ "$1" == *${p#-}* ]] && return 1
    else any=1; [[ "$1" == *$p* ]] && want=1; fi
  done
  [ $any -eq 0 ] || [ $want -eq 1 ]
}
export GPT_TEST_DATA=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" 2>/dev/null && pwd || echo /nonexistent)
export PATH="$build/bin:$PATH" TOP="$top" FIX="$top/tests/fixtures" DATA="$GPT_TEST_DATA" GPT_TEST_BUILD="$build"
export LC_ALL=C.UTF-8
budget=${GPT_TEST_BUDGET:-0}
jobs=${GPT_TEST_JOBS:-}
if [ -z "$jobs" ] && [[ " ${MAKEFLAGS:-} " =~ \ -j([0-9]+) ]]; then jobs=${BASH_REMATCH[1]}; fi
# the cores, not nproc alone: it answers OMP_NUM_THREADS (tsan.sh sets 1 for its tools)
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)
[ -n "$jobs" ] || jobs=$(( cores + 1 ))
scale=$(( (jobs > 1 ? jobs : 1) * ${GPT_TEST_SLOWDOWN:-1} ))
# (a test shares a core when more run than there are cores: its budget grows as its share falls)
[ "$budget" = 0 ] || [ "$jobs" -le "$cores" ] || budget=$(( (budget * jobs + cores - 1) / cores ))
res=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$res"' EXIT

# ---- the tests, in the order their results are printed
names=()
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  picked "$name" && names+=("$name")
done
for script in "$top"/tests/cli/*.sh; do
  [ -f "$script" ] || continue
  name=cli/$(basename "$script" .sh)
  picked "${name#cli/}" && names+=("$name")
done

# ---- one test: its report in $res/ID.report, "status seconds" in $res/ID.done (written last)
# status: pass, fail, skip; a unit binary's counts in $res/ID.counts, its skips in $res/ID.skips
run_unit() { # id name
  local id=$1 name=$2 log="$build/$2.log" out rc line
  out=$(cd "$top" && timeout $((600 * scale)) "$build/tests/$name" 2>"$log"); rc=$?
  line=$(printf '%s\n' "$out" | tail -n 1)
  if [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}" > "$res/$id.counts"
  else
    echo "0 1 0" > "$res/$id.counts"
  fi
  if [ $rc -ne 0 ]; then
    { echo "FAIL $name (exit $rc):"; sed 's/^/  /' "$log" | tail -n 30; } > "$res/$id.report"
    return 1
  fi
  printf '%-34s %s\n' "$name" "$line" > "$res/$id.report"
  grep '^SKIP' "$log" | sed 's/^/  /' >> "$res/$id.report"
  grep '^SKIP ' "$log" | sed 's/^SKIP //' > "$res/$id.skips"
  return 0
}

run_cli() { # id name
  local id=$1 name=${2#cli/} base="$top/tests/cli/${2#cli/}" work rc want why=""
  work=$(mktemp -d)
  (cd "$work" && timeout $((300 * scale)) bash "$base.sh" >"$work/.stdout" 2>"$work/.stderr" </dev/null); rc=$?
  if [ $rc -eq 77 ]; then
    tail -n 1 "$work/.stderr" > "$res/$id.skips"
    echo "skip cli/$name: $(cat "$res/$id.skips")" > "$res/$id.report"
    rm -rf "$work"; return 77
  fi
  want=0; [ -f "$base.code" ] && want=$(cat "$base.code")
  [ "$rc" -ne "$want" ] && why="exit $rc, expected $want"
  if [ -z "$why" ] && [ -f "$base.out" ] && ! diff -u "$base.out" "$work/.stdout" >"$work/.diff"; then why="stdout differs"; fi
  if [ -z "$why" ] && [ -f "$base.err" ] && ! diff -u "$base.err" "$work/.stderr" >"$work/.diff"; then why="stderr differs"; fi
  if [ -n "$why" ]; then
    { echo "FAIL cli/$name: $why"
      [ -s "$work/.diff" ] && sed 's/^/  /' "$work/.diff" | head -n 40
      sed 's/^/  stderr: /' "$work/.stderr" | tail -n 15; } > "$res/$id.report"
  fi
  rm -rf "$work"
  [ -z "$why" ]
}

run_one() { # id name
  local t0=$EPOCHREALTIME rc status cpu
  if [[ "$2" == cli/* ]]; then run_cli "$1" "$2"; else run_unit "$1" "$2"; fi
  rc=$?
  status=pass; [ $rc -eq 77 ] && status=skip; [ $rc -ne 0 ] && [ $rc -ne 77 ] && status=fail
  # the CPU seconds of its processes (this subshell's children: user and system), then the
  # result, whole or absent: flush reads it as soon as it exists
  times > "$res/$1.times" # (in this shell: a pipe or $(...) would time a subshell's children)
  cpu=$(tail -n 1 "$res/$1.times" | awk '{ for (i = 1; i <= 2; i++) { split($i, t, "m"); s += t[1] * 60 + t[2] } printf "%.1f", s }')
  echo "$status $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') $cpu" > "$res/$1.tmp"
  mv "$res/$1.tmp" "$res/$1.done"
}

# ---- the order they start in: the slowest of the last run first, new ones before the rest
# (a build without a run yet, as in CI: the times in tests/test-times, a copy of a make test's)
declare -A last=() last_line=()
seen=$build/test-times; [ -f "$seen" ] || seen=$top/tests/test-times
if [ -f "$seen" ]; then
  while read -r s n c; do
    [[ -n "$n" && "$s" =~ ^[0-9.]+$ ]] && last[$n]=$s last_line[$n]="$s $n${c:+ $c}"
  done < "$seen"
fi
order=()
while read -r _ i; do order+=("$i"); done < <(
  for i in "${!names[@]}"; do echo "${last[${names[$i]}]:-100000} $i"; done | sort -s -k1,1 -g -r)

# ---- the results, in the printed order, as they come
passed=0 failed=0 skipped=0 printed=0
failures=() times=() cpus=() slow=()
declare -A skips=() ran=() # skipped test -> reason; tests (binaries, cli/NAME) that ran
flush() {
  local i name status secs cpu c1 c2 c3 l
  while [ $printed -lt ${#names[@]} ] && [ -f "$res/$printed.done" ]; do
    i=$printed name=${names[$i]}
    read -r status secs cpu < "$res/$i.done"
    ran[$name]=1
    times+=("$secs $name $cpu") cpus+=("$cpu $name")
    [ -f "$res/$i.report" ] && cat "$res/$i.report"
    if [[ "$name" == cli/* ]]; then
      case $status in
        pass) passed=$((passed + 1)) ;;
        skip) skipped=$((skipped + 1)); skips[$name]=$(cat "$res/$i.skips") ;;
        *) failed=$((failed + 1)); failures+=("$name") ;;
      esac
    else
      read -r c1 c2 c3 < "$res/$i.counts"
      passed=$((passed + c1)) failed=$((failed + c2)) skipped=$((skipped + c3))
      [ "$status" = fail ] && failures+=("$name")
      if [ -f "$res/$i.skips" ]; then
        while IFS= read -r l; do skips[$name/${l%%: *}]=${l#*: }; done < "$res/$i.skips"
      fi
    fi
    if [ "$budget" != 0 ] && [ "$status" != skip ] && awk -v s="$secs" -v b="$budget" 'BEGIN { exit !(s > b) }'; then
      slow+=("$name ($secs s)")
      if [ "${GPT_TEST_BUDGET_FAIL:-0}" = 1 ]; then
        failed=$((failed + 1)); failures+=("$name")
        echo "FAIL $name: took $secs s, over the budget of $budget s a test (GPT_TEST_BUDGET): make it faster"
      fi
    fi
    printed=$((printed + 1))
  done
}

for i in "${order[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; flush; done
  run_one "$i" "${names[$i]}" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; flush; done
wait
flush

if [ -z "$pattern" ] || [ ! -f "$build/test-times" ]; then
  printf '%s\n' "${times[@]}" > "$build/test-times.tmp" && mv "$build/test-times.tmp" "$build/test-times"
else # a partial run updates its tests' times only
  { printf '%s\n' "${times[@]}"
    for n in "${!last[@]}"; do [ -n "${ran[$n]:-}" ] || echo "${last_line[$n]}"; done; } > "$build/test-times.tmp" &&
    mv "$build/test-times.tmp" "$build/test-times"
fi

if [ -n "${GPT_EXPECTED_SKIPS:-}" ]; then # the skips against the list: coverage that disappears fails
  declare -A expected=()
  while read -r t _; do [[ -z "$t" || "$t" == \#* ]] || expected[$t]=1; done < "$GPT_EXPECTED_SKIPS"
  for t in "${!skips[@]}"; do
    [ -n "${expected[$t]:-}" ] && continue
    failed=$((failed + 1)); failures+=("$t")
    echo "FAIL $t: skipped (${skips[$t]}), not in $GPT_EXPECTED_SKIPS: give it what it needs, or add \"$t  REASON\" there"
  done
  for t in "${!expected[@]}"; do
    [ -n "${skips[$t]:-}" ] && continue
    if [ -n "${ran[$t]:-}${ran[${t%%/*}]:-}" ]; then why="ran without skipping"
    elif [ -z "$pattern" ]; then why="does not exist"
    else continue; fi
    failed=$((failed + 1)); failures+=("$t")
    echo "FAIL $t: listed in $GPT_EXPECTED_SKIPS as skipped, but it $why: remove its line there"
  done
fi

if [ ${#times[@]} -gt 1 ]; then
  echo "slowest ($jobs at a time; seconds):"
  printf '%s\n' "${times[@]}" | sort -g -r | head -n 10 | awk '{ printf "  %6.1f  %s\n", $1, $2 }'
  echo "most CPU (seconds of the cores, $(printf '%s\n' "${cpus[@]}" | awk '{ s += $1 } END { printf "%.0f", s }') in all):"
  printf '%s\n' "${cpus[@]}" | sort -g -r | head -n 10 | awk '{ printf "  %6.1f  %s\n", $1, $2 }'
fi
[ ${#slow[@]} -gt 0 ] && echo "SLOW (over the budget of $budget s a test; make them faster): ${slow[*]}"
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
