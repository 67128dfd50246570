#!/usr/bin/env bash
# Runs every test: the unit-test binaries in BUILD/tests, then the CLI cases in tests/cli.
# A CLI case is NAME.sh (run by bash in a fresh temp dir) with optional NAME.out / NAME.err
# (expected stdout / stderr) and NAME.code (expected exit status, default 0); exit 77 = skipped.
# Ends with the line "N passed, N failed, N skipped"; exits 1 if anything failed.
# Usage: tests/run.sh BUILD [PATTERN]   (PATTERN filters test names, e.g. shard)
# With GPT_EXPECTED_SKIPS=FILE (CI: tests/expected-skips), the skipped tests must be exactly those
# FILE lists (of those that ran): an unexpected skip, or a listed test that ran without skipping
# or no longer exists, is a failure naming it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
pattern=${2:-}
export GPT_TEST_DATA=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" 2>/dev/null && pwd || echo /nonexistent)
export PATH="$build/bin:$PATH" TOP="$top" FIX="$top/tests/fixtures" DATA="$GPT_TEST_DATA" GPT_TEST_BUILD="$build"
export LC_ALL=C.UTF-8
passed=0 failed=0 skipped=0
failures=()
declare -A skips=() ran=() # skipped test -> reason; tests (binaries, cli/NAME) that ran

for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  [[ -n "$pattern" && "$name" != *$pattern* ]] && continue
  ran[$name]=1
  out=$(cd "$top" && timeout 600 "$t" 2>"$build/$name.log"); rc=$?
  line=$(printf '%s\n' "$out" | tail -n 1)
  if [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2]))
    skipped=$((skipped + BASH_REMATCH[3]))
  else
    failed=$((failed + 1))
  fi
  if [ $rc -ne 0 ]; then
    failures+=("$name"); echo "FAIL $name (exit $rc):"; sed 's/^/  /' "$build/$name.log" | tail -n 30
  else
    printf '%-34s %s\n' "$name" "$line"
    grep '^SKIP' "$build/$name.log" | sed 's/^/  /'
    while IFS= read -r l; do l=${l#SKIP }; skips[$name/${l%%: *}]=${l#*: }; done < <(grep '^SKIP ' "$build/$name.log")
  fi
done

for script in "$top"/tests/cli/*.sh; do
  [ -f "$script" ] || continue
  name=$(basename "$script" .sh)
  [[ -n "$pattern" && "$name" != *$pattern* ]] && continue
  base="${script%.sh}"
  work=$(mktemp -d)
  ran[cli/$name]=1
  (cd "$work" && timeout 300 bash "$script" >"$work/.stdout" 2>"$work/.stderr" </dev/null); rc=$?
  want=0; [ -f "$base.code" ] && want=$(cat "$base.code")
  why=""
  if [ $rc -eq 77 ]; then
    skips[cli/$name]=$(tail -n 1 "$work/.stderr")
    skipped=$((skipped + 1)); echo "skip cli/$name: ${skips[cli/$name]}"; rm -rf "$work"; continue
  fi
  [ "$rc" -ne "$want" ] && why="exit $rc, expected $want"
  if [ -z "$why" ] && [ -f "$base.out" ] && ! diff -u "$base.out" "$work/.stdout" >"$work/.diff"; then why="stdout differs"; fi
  if [ -z "$why" ] && [ -f "$base.err" ] && ! diff -u "$base.err" "$work/.stderr" >"$work/.diff"; then why="stderr differs"; fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("cli/$name")
    echo "FAIL cli/$name: $why"
    [ -s "$work/.diff" ] && sed 's/^/  /' "$work/.diff" | head -n 40
    sed 's/^/  stderr: /' "$work/.stderr" | tail -n 15
  fi
  rm -rf "$work"
done

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

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
