# A CUDA error in the middle of a run, injected by the emulator (device = cuda-emu): a failed
# kernel launch (GPT_EMU_FAIL_LAUNCH=N, cudaErrorLaunchFailure) and a lost device
# (GPT_EMU_LOSE_DEVICE=N, cudaErrorDevicesUnavailable, sticky). gpt-train, checkpointing every 3
# steps, stops with exit 1 and one line naming the step, the CUDA error, the kernel and its
# file:line; the last checkpoint (before that step) verifies, and a run resumed from it on the
# CPU ends where an uninterrupted CPU run does. gpt-sample stops mid-generation (exit 1, after
# the tokens it printed, which are the first of the CPU's greedy sample).
source "$TOP/tests/cli/lib.bash"; need_data
set +e
tiny_data d
R=("${TINY[@]}" --max_iters=12 --eval_interval=3 -q)
gpt-train "${R[@]}" --device=cpu --out_dir=cpu > /dev/null
losses cpu/metrics.jsonl > cpu.l
# shown ERR: the message with the kernel's name and line numbers left out (they change with the code)
shown() { sed -E "s/step [0-9]+:/step S:/; s/kernel '[^']*'/kernel 'K'/; s/in kernel [^ ]+ \(kernels\/cuda\/[a-z_]+\.cu:[0-9]+\)/in kernel K (kernels\/cuda\/F.cu:L)/; s/after [0-9]+ generated tokens/after N generated tokens/" "$1"; }
for fault in GPT_EMU_FAIL_LAUNCH=540 GPT_EMU_LOSE_DEVICE=520; do
  echo "== gpt-train, $fault"
  out=${fault%%=*}
  env "$fault" gpt-train "${R[@]}" --device=cuda-emu --dtype=float32 --out_dir=$out > log.txt 2> err.txt
  echo "exit $? ($(wc -l < err.txt) line)"
  shown err.txt
  step=$(sed -nE 's/^gpt-train: step ([0-9]+):.*/\1/p' err.txt)
  last=$(readlink $out/latest.safetensors | sed -E 's/ckpt_0*([0-9]+)\.safetensors/\1/')
  [ -n "$step" ] && [ "$last" -lt "$step" ] && [ "$step" -le $((last + 3)) ] && echo "latest is the last checkpoint before the failed step"
  ls $out | grep -c '\.tmp'
  gpt-ckpt verify $out/latest.safetensors > /dev/null && echo "latest verifies"
  gpt-train "${R[@]}" --device=cpu --out_dir=$out --init_from=resume > /dev/null && echo "resumed on the CPU"
  # (the log keeps the failed run's steps after the checkpoint too: the resumed run's come last)
  losses $out/metrics.jsonl | awk -v s="$last" '$1 > s { v[$1] = $0 } END { for (k = s + 1; k in v; k++) print v[k] }' > resumed.l
  tail -n $(wc -l < resumed.l) cpu.l > cpu_tail.l
  close resumed.l cpu_tail.l 2e-5 && echo "the CPU's losses from the step after it"
done
echo "== gpt-sample"
gpt-sample -q -m cpu/latest.safetensors --device=cpu -t 0 -n 40 -p 'ROMEO:' > full.txt
for fault in GPT_EMU_FAIL_LAUNCH=300 GPT_EMU_LOSE_DEVICE=300; do
  env "$fault" gpt-sample -q -m cpu/latest.safetensors --device=cuda-emu --dtype=float32 -t 0 -n 40 -p 'ROMEO:' > part.txt 2> err.txt
  echo "exit $? ($(wc -l < err.txt) line)"
  shown err.txt
  n=$(stat -c %s part.txt)
  [ "$n" -gt 6 ] && [ "$n" -lt "$(stat -c %s full.txt)" ] && cmp -s -n "$n" part.txt full.txt && echo "printed the first tokens of the sample"
done
