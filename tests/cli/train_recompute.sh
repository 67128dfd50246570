# recompute = true (gelu: GELU outputs recomputed in the backward, one buffer for every layer; the
# default on cuda) and gelu+ln (the LayerNorm outputs too) train the same model as recompute =
# false: bit for bit on the CPU, and under the CUDA emulator to a float's rounding in fp32 (the
# recomputed GELU is the emulated cuBLASLt epilogue's bit for bit, the LayerNorm the fused op's)
# and with losses within 1% in bfloat16 (GELU of the stored bf16 input, where the epilogue takes
# the fp32 sum).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
ARGS=("${TINY[@]}" --threads=1 --dropout=0.1 --max_iters=4 --eval_interval=1000)
gpt-train -q "${ARGS[@]}" --out_dir=on > /dev/null
gpt-train -q "${ARGS[@]}" --out_dir=off --recompute=false > /dev/null
gpt-train -q "${ARGS[@]}" --out_dir=ln --recompute=gelu+ln > /dev/null
losses on/metrics.jsonl | cmp - <(losses off/metrics.jsonl) && cmp <(st_data on/latest.safetensors) \
  <(st_data off/latest.safetensors) && echo "cpu: recompute = true gives the bits of false"
losses ln/metrics.jsonl | cmp - <(losses off/metrics.jsonl) && cmp <(st_data ln/latest.safetensors) \
  <(st_data off/latest.safetensors) && echo "cpu: recompute = gelu+ln gives the bits of false"
gpt-train -q "${ARGS[@]}" --print-config | grep '^recompute'
for dt in float32 bfloat16; do
  gpt-train -q "${ARGS[@]}" --device=cuda-emu --dtype=$dt --out_dir=emu-on-$dt --recompute=gelu+ln > /dev/null
  gpt-train -q "${ARGS[@]}" --device=cuda-emu --dtype=$dt --out_dir=emu-off-$dt --recompute=false > /dev/null
  losses emu-on-$dt/metrics.jsonl > on.l; losses emu-off-$dt/metrics.jsonl > off.l
  if [ $dt = float32 ]; then # the same GELU values: the same training, to a float's rounding
    close on.l off.l 1e-6 && st_close emu-on-$dt/latest.safetensors emu-off-$dt/latest.safetensors 1e-5
  else # GELU of the stored bf16 input against the epilogue's of the fp32 sum: the losses agree
    close on.l off.l 1e-2
  fi && echo "cuda-emu $dt: recompute = gelu+ln trains as false"
done
