# The attention paths' op tests (test_ops on cuda-emu:plain and :flash: test_attention; fa2 is
# auto's, run by emu_orders.sh) with threads started and released in shuffled order, as
# emu_orders.sh does for every CUDA op test on the default path (a script of its own:
# both fit the CLI cases' time limit), the race checker off as there.
source "$TOP/tests/cli/lib.bash"
[ -f "$GPT_TEST_BUILD/lib/libgptkit-cuda-emu.so" ] || { echo "no cuda-emu library in $GPT_TEST_BUILD" >&2; exit 77; }
for order in shuffle; do
  if GPT_EMU_ORDER=$order GPT_EMU_RACECHECK=0 GPT_TEST_DEVICES="cuda-emu:plain cuda-emu:flash" \
     "$GPT_TEST_BUILD/tests/test_ops" > log 2>&1 && tail -n 1 log | grep -q ' 0 failed, 0 skipped$'; then
    echo "$order: test_ops on the attention paths passes"
  else
    sed 's/^/  /' log | grep -v '^  ok' | tail -n 20 >&2
    echo "$order: test_ops on the attention paths FAILS"
  fi
done
