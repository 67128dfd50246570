# Under ulimit -v the address-space limit is what is available, and the refusal names it;
# GPT_MEM_CHECK=warn turns the refusal into a warning (the run then goes on and fails as it may).
# Skipped under AddressSanitizer (make check), which cannot start under ulimit -v.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/fault_mem.bash"
set +e
if ldd "$(command -v gpt-train)" | grep libasan > /dev/null; then # not -q: under pipefail, ldd cut off by SIGPIPE would fail the test
  echo "AddressSanitizer cannot run under ulimit -v" >&2; exit 77
fi
tiny_data d
echo "== ulimit -v"
(ulimit -v 2000000; timed gpt-train -q "${TINY[@]}" --batch_size=100000 --max_iters=1 --out_dir=o)
test ! -e o && echo "nothing written"
echo "== GPT_MEM_CHECK=warn"
(ulimit -v 2000000; GPT_MEM_CHECK=warn gpt-train "${TINY[@]}" --batch_size=100000 --max_iters=1 --out_dir=o > /dev/null 2> err.txt)
echo "exit $?"
grep -v '^gpt-train: device\|^  \|config:$' err.txt | numbers
