# The attention setting (gpt-train's attention key, gpt-sample's and gpt-evalppl's --attention):
# a bad value is one line naming the setting, exit 2; cudnn under the emulator (cuda-emu) is one
# line at open, exit 1, before any step; auto there is the own fa2 kernels (the same losses, bit
# for bit, as attention = fa2, and not plain's); the CPU ignores it.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(wc -l < err.txt) line: $(sed 's/ (kernels[^)]*)$//' err.txt)"; }
run gpt-train -q "${TINY[@]}" --device=cuda-emu --attention=fast --max_iters=1 --out_dir=bad
run gpt-train -q "${TINY[@]}" --device=cuda-emu --attention=cudnn --max_iters=1 --out_dir=bad
test ! -e bad
t3() { gpt-train -q "${TINY[@]}" --device=cuda-emu --dtype=bfloat16 --max_iters=3 --eval_interval=10 "$@" > /dev/null; }
t3 --out_dir=auto
t3 --out_dir=fa2 --attention=fa2
t3 --out_dir=plain --attention=plain
losses auto/metrics.jsonl > auto.l
losses fa2/metrics.jsonl > fa2.l
losses plain/metrics.jsonl > plain.l
wc -l < auto.l
cmp -s auto.l fa2.l && echo "cuda-emu: auto = fa2"
cmp -s auto.l plain.l || echo "cuda-emu: auto != plain"
gpt-train -q "${TINY[@]}" --device=cpu --attention=cudnn --max_iters=1 --out_dir=cpu > /dev/null && echo "cpu: ignored"
for tool in gpt-sample gpt-evalppl; do
  args=(-m cpu/latest.safetensors); [ $tool = gpt-sample ] && args+=(-n 2) || args+=(d/val.bin)
  run $tool "${args[@]}" --device=cuda-emu --attention=flash2
  run $tool "${args[@]}" --device=cuda-emu --attention=cudnn
  $tool -q "${args[@]}" --device=cuda-emu --attention=plain > /dev/null && echo "$tool: plain runs"
done
