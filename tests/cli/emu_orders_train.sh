# Races (see emu_orders.sh): train_cuda_emu.sh (10 training steps on cuda-emu against the CPU,
# resume across devices, sampling and scoring) gives its expected output with the threads of every
# block started and released in shuffled order and the blocks run in reverse
# (GPT_EMU_ORDER=shuffle), the race checker off (emu_orders.sh).
source "$TOP/tests/cli/lib.bash"; need_data
[ -f "$GPT_TEST_BUILD/lib/libgptkit-cuda-emu.so" ] || { echo "no cuda-emu library in $GPT_TEST_BUILD" >&2; exit 77; }
GPT_EMU_ORDER=shuffle GPT_EMU_RACECHECK=0 bash "$TOP/tests/cli/train_cuda_emu.sh" > out 2> err || { cat err >&2; echo "train_cuda_emu.sh failed"; }
diff "$TOP/tests/cli/train_cuda_emu.out" out >&2 && echo "shuffle: train_cuda_emu.sh gives its expected output"
