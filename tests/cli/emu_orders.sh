# Races: a GPU runs the threads of a block, and the blocks, in no set order, but the emulator runs
# them one after another, so a missing __syncthreads or __syncwarp can pass in its usual order.
# Every CUDA op test runs again with threads started and released in shuffled order (GPT_EMU_ORDER,
# blocks reversed too): a race would change the results (tests/unit/emu/test_emu_order.cu shows
# that a missing barrier does change them). Shuffled only, not also reverse (half the time): each
# block and launch draws another permutation, which exposes what reverse does in most of them
# (test_emu_order: 9 launches of 10 for its missing barrier). The attention
# paths' cases: emu_orders_paths.sh. Whole training steps in shuffled order: emu_orders_train.sh.
# The shared-memory race checker is off here (GPT_EMU_RACECHECK=0: a third less time): it sees
# the same accesses in every order, and test_ops runs it in the usual order.
source "$TOP/tests/cli/lib.bash"
[ -f "$GPT_TEST_BUILD/lib/libgptkit-cuda-emu.so" ] || { echo "no cuda-emu library in $GPT_TEST_BUILD" >&2; exit 77; }
for order in shuffle; do
  for t in test_cuda_comm test_ops test_ops_fused; do
    if GPT_EMU_ORDER=$order GPT_EMU_RACECHECK=0 GPT_TEST_DEVICES=cuda-emu "$GPT_TEST_BUILD/tests/$t" > log 2>&1 &&
       tail -n 1 log | grep -q ' 0 failed, 0 skipped$'; then
      echo "$order: $t passes"
    else
      sed 's/^/  /' log | grep -v '^  ok' | tail -n 20 >&2
      echo "$order: $t FAILS"
    fi
  done
done
