# The CUDA backend under the emulator (device = cuda-emu) against the CPU, end to end: 10 steps of
# the tiny model (dropout and gradient accumulation on) give the same losses in float32 (to 2e-5
# relative: the same math, other summation orders) and within bfloat16's precision in bfloat16
# (3e-2 relative: activations and matmul inputs rounded to 8 significant bits); checkpoints move
# between the devices (5 steps on one, 5 more on the other = 10 on the CPU, to 2e-5); gpt-sample's
# greedy tokens and gpt-evalppl's loss are the same on both; with GPT_CUDA_FUSED_GRADS=1 too.
# The emulator runs each block's threads and the blocks in shuffled order (a race would change
# the losses; GPT_EMU_ORDER, unless set), as the op tests do.
source "$TOP/tests/cli/lib.bash"; need_data
export GPT_EMU_ORDER=${GPT_EMU_ORDER:-shuffle}
tiny_data d
run10() { gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=10 --eval_interval=10 "$@" > /dev/null; }
run10 --device=cpu --out_dir=cpu
run10 --device=cuda-emu --dtype=float32 --out_dir=emu32
run10 --device=cuda-emu --dtype=bfloat16 --out_dir=emu16
losses cpu/metrics.jsonl > cpu.l
losses emu32/metrics.jsonl > emu32.l
losses emu16/metrics.jsonl > emu16.l
wc -l < emu32.l
close emu32.l cpu.l 2e-5 && echo "float32: same losses as the CPU"
close emu16.l cpu.l 3e-2 && echo "bfloat16: within bf16 precision"
# GPT_CUDA_FUSED_GRADS=1: the bias and GELU gradients in the gemms' epilogues (the emulator's
# cuBLASLt DGELU and BGRADA), the same losses again
GPT_CUDA_FUSED_GRADS=1 run10 --device=cuda-emu --dtype=float32 --out_dir=fused32
GPT_CUDA_FUSED_GRADS=1 run10 --device=cuda-emu --dtype=bfloat16 --out_dir=fused16
losses fused32/metrics.jsonl > fused32.l
losses fused16/metrics.jsonl > fused16.l
close fused32.l cpu.l 2e-5 && echo "float32, fused gradient epilogues: the CPU's losses"
close fused16.l cpu.l 3e-2 && echo "bfloat16, fused gradient epilogues: within bf16 precision"
# the default dtype on cuda-emu is bfloat16, and it says which device it took
gpt-train "${TINY[@]}" --device=cuda-emu --max_iters=1 --out_dir=dflt --print-config | grep '^dtype\|^device' | sort
# resume across devices: cuda-emu -> cpu and cpu -> cuda-emu, float32
gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=5 --eval_interval=10 --device=cuda-emu --dtype=float32 --out_dir=x > /dev/null
gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=10 --eval_interval=10 --device=cpu --out_dir=x --init_from=resume > /dev/null
gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=5 --eval_interval=10 --device=cpu --out_dir=y > /dev/null
gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=10 --eval_interval=10 --device=cuda-emu --dtype=float32 --out_dir=y --init_from=resume > /dev/null
losses x/metrics.jsonl > x.l
losses y/metrics.jsonl > y.l
close x.l cpu.l 2e-5 && echo "cuda-emu then cpu: the CPU's losses"
close y.l cpu.l 2e-5 && echo "cpu then cuda-emu: the CPU's losses"
# sampling and scoring a checkpoint trained on the CPU
for dev in cpu cuda-emu; do
  gpt-sample -q -m cpu/latest.safetensors --device=$dev --dtype=float32 -t 0 -n 24 -p 'ROMEO:' --ids > s.$dev
done
cmp s.cpu s.cuda-emu && echo "greedy tokens: the same"
for dev in cpu cuda-emu; do
  gpt-evalppl -q -m cpu/latest.safetensors --device=$dev --dtype=float32 --json d/val.bin | jq -r .nll > e.$dev
done
awk 'NR == FNR { a = $1; next } { d = a - $1; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' e.cpu e.cuda-emu && echo "evalppl: the same loss"
# device = cuda on a machine without a GPU (this one): one line naming the device, exit 1, whether
# the real library was built (then: no GPU) or not (then: not found); the messages are in
# tests/unit/test_backend_open.c
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(wc -l < err.txt) line: $(sed 's/\(device cuda: \).*/\1.../' err.txt)"; }
run gpt-train -q "${TINY[@]}" --device=cuda --max_iters=1 --out_dir=nogpu
run gpt-sample -m cpu/latest.safetensors --device=cuda -n 1
# bfloat16 asked of auto, which finds no GPU here: the CPU trains in float32 only
run gpt-train -q "${TINY[@]}" --device=auto --dtype=bfloat16 --max_iters=1 --out_dir=nogpu
test ! -e nogpu
# a GPU older than sm_80 (the emulator reporting compute capability 7.5, where no kernel loads):
# device cuda-emu is one line naming it and what to do; auto (given the emulator as its cuda
# library) takes the CPU and says why
rc=0; GPT_EMU_SM=75 gpt-train -q "${TINY[@]}" --device=cuda-emu --max_iters=1 --out_dir=oldgpu 2> err.txt || rc=$?
echo "exit $rc: $(wc -l < err.txt) line: $(sed 's/ (kernels[^)]*)$//' err.txt)"
GPT_EMU_SM=75 GPT_CUDA_LIB=$GPT_TEST_BUILD/lib/libgptkit-cuda-emu.so gpt-evalppl -m cpu/latest.safetensors \
  --device=auto d/val.bin 2>&1 >/dev/null | grep -c "warning: device auto: the CPU, since cuda-emu backend: .* 7.5; "
test ! -e oldgpu
# an NVIDIA driver older than the library's CUDA (the emulator's driver at 12.8): one line naming
# both versions, and auto says why it took the CPU; no driver at all is no news
rc=0; GPT_EMU_DRIVER=12080 gpt-train -q "${TINY[@]}" --device=cuda-emu --max_iters=1 --out_dir=olddrv 2> err.txt || rc=$?
echo "exit $rc: $(cat err.txt)"
emu_auto() { GPT_CUDA_LIB=$GPT_TEST_BUILD/lib/libgptkit-cuda-emu.so gpt-evalppl -m cpu/latest.safetensors --device=auto d/val.bin 2>&1 >/dev/null | grep -c "warning: device auto" || true; }
GPT_EMU_DRIVER=12080 emu_auto
GPT_EMU_DRIVER=0 emu_auto
# a CUDA library that is there but does not load: auto takes the CPU and says why, once
echo "not a library" > junk.so
GPT_CUDA_LIB=$PWD/junk.so gpt-evalppl -m cpu/latest.safetensors --device=auto d/val.bin 2>&1 >/dev/null |
  grep -c "^gpt-evalppl: warning: device auto: the CPU, since device cuda: GPT_CUDA_LIB=$PWD/junk.so: "
