#!/usr/bin/env bash
# Runs CLI tests with every gpt-* tool under valgrind memcheck: BUILD-vg/bin holds one wrapper
# per tool of BUILD/bin, and tests/run.sh runs the chosen tests with it first on PATH. An
# invalid access, a use of uninitialized memory, or a definite or indirect leak makes the tool
# exit 99 (so the test fails) and its report is printed. Still-reachable blocks at exit are not
# leaks. Left out by default: gpt-train's tests (training under valgrind takes ~50x as long),
# gpt-sample's that generate and evalppl_basic (minutes each: make check runs them under ASan),
# tokenize_cases (200 runs of the GPT-2 encoder: make check and fuzz_bpe_roundtrip cover it),
# tokenize_archives (libarchive's decompressors: minutes), and the tests that close stdin
# (tokenize_messages, tokenize_shard_readers: under valgrind fd 0 is not closed when the tool
# starts). gpt-train itself runs natively where these tests train a model to work on.
# Usage: tests/sanitize/valgrind.sh BUILD [PATTERN...]   (default: the list below)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd); shift || true
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=(tokenize_char tokenize_errors tokenize_shakespeare
  tokenize_signal tokenize_split tokenize_threads tokenize_vocab tokenize_jsonl tokenize_parquet
  tokenize_hub ckpt_errors ckpt_export_ref
  ckpt_hub ckpt_info ckpt_llmc ckpt_stdout ckpt_verify sample_errors evalppl_vocab)
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 1; }
vg=$build-vg
logs=$vg/logs
rm -rf "$vg" && mkdir -p "$vg/bin" "$vg/tests" "$logs"
ln -s "$build/lib" "$vg/lib" 2>/dev/null || true
ln -s "$build/bin/gpt-train" "$vg/bin/gpt-train"
for tool in "$build"/bin/gpt-*; do
  name=${tool##*/}
  [ "$name" = gpt-train ] && continue
  # valgrind writes files of its own in TMPDIR: where a test names one that is not a writable
  # directory (to see the tool refuse it), the tool runs without valgrind
  cat >"$vg/bin/$name" <<WRAP
#!/bin/sh
[ -z "\${TMPDIR:-}" ] || { [ -d "\$TMPDIR" ] && [ -w "\$TMPDIR" ]; } || exec "$tool" "\$@"
exec valgrind -q --tool=memcheck --error-exitcode=99 --leak-check=full \\
  --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \\
  --suppressions="$top/tests/sanitize/valgrind.supp" --log-file="$logs/$name.%p.log" \\
  "$tool" "\$@"
WRAP
  chmod +x "$vg/bin/$name"
done
rc=0
export GPT_TEST_SLOWDOWN=${GPT_TEST_SLOWDOWN:-2} # run.sh's hang guard, for valgrind's slowdown
bash "$top/tests/run.sh" "$vg" "${patterns[@]}" || rc=1 # in parallel, as make test
for log in "$logs"/*.log; do
  [ -s "$log" ] || continue
  rc=1; echo "valgrind: ${log##*/}:"; head -n 40 "$log" | sed 's/^/  /'
done
[ $rc -eq 0 ] && echo "valgrind: no errors, no leaks"
exit $rc
