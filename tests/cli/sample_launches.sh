# The kernels a decoded token launches on cuda-emu, from the emulator's launch log
# (GPT_EMU_LAUNCH_LOG=FILE: a line a kernel or cuBLASLt matmul run, a CUDA graph's at each replay):
# gpt-sample's tokens 2..9 (the recorded decode step replayed) of a 2-layer model with a cache of
# 128 (the split attention over the keys, as GPT-2's 1024 takes), per token by kernel, and a
# layer's count from a 1-layer model's; issue 43 brings a layer to at most 4. The token's draw
# (sample_rows) is in the same replay: no logits come to the host. The log's lines: name, shape,
# microseconds.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
count() { awk '{ print $1 }' "$1" | sort | uniq -c; }
for L in 1 2; do
  gpt-train -q "${TINY[@]}" --n_layer=$L --block_size=128 --max_iters=1 --eval_interval=10 \
    --out_dir=o$L > /dev/null
  for n in 2 10; do
    GPT_EMU_RACECHECK=0 GPT_EMU_LAUNCH_LOG=log$L.$n gpt-sample -q --device cuda-emu \
      -m o$L/latest.safetensors -n $n --seed 1 --prompt "ROMEO:" > /dev/null
  done
  join -1 2 -2 2 -a 2 -e 0 -o 0,1.1,2.1 <(count log$L.2) <(count log$L.10) > per$L.txt
done
awk '$2 !~ /^(grid|m)=/ || $NF !~ /^[0-9.]+$/ { bad++ } END { print bad + 0, "malformed lines" }' log2.10
awk '{ k = ($3 - $2) / 8; if (k) printf "%-24s %g a token\n", $1, k }' per2.txt
tok() { awk '{ k += ($3 - $2) / 8 } END { print k }' "$1"; }
t1=$(tok per1.txt) t2=$(tok per2.txt)
echo "a token: $t2 kernels with 2 layers; a layer $((t2 - t1)), the rest $((2 * t1 - t2))"
