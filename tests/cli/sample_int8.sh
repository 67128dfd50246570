# --dtype int8 (weight matrices as llama.cpp's Q8_0, CPU only) on a char-level model trained
# here (300 steps: validation loss 2.7 nats, from 4.1 untrained): gpt-evalppl's loss on its
# validation shard within 0.5% of fp32's, both with windows of 16 (batches of 16 rows: weights
# widened, activations exact) and of 8 (8 rows: activations quantized too, int8 dot products);
# greedy gpt-sample gives fp32's text; a seeded sample is the same twice; the reference backend
# runs int8 weights; gpt-ckpt convert --dtype int8 writes them (see below); a model whose n_embd
# is not a multiple of 32 is refused in one line, as is cuda (the help says so).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=300 --eval_interval=300 --lr_decay_iters=300 --out_dir=o > train.log
export GPT_MODEL=o/latest.safetensors
for ctx in 16 8; do
  gpt-evalppl -q --json --context $ctx d/val.bin > f32.json
  gpt-evalppl -q --json --context $ctx --dtype int8 d/val.bin > q8.json
  jq -r '.tokens' f32.json q8.json
  nll_within f32.json q8.json 0.005
done
gpt-sample -q -n 40 -t 0 -p 'ROMEO:' > g32
gpt-sample -q -n 40 -t 0 -p 'ROMEO:' --dtype int8 > g8
cmp g32 g8 && echo "greedy: int8 = float32"
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype int8 > s1
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype int8 | cmp - s1 && echo "int8: same seed, same output"
# gpt-ckpt convert --dtype int8: I8 weight matrices with F16 scales in q8_0.NAME; loaded with
# --dtype int8 they are the same int8 weights (the same samples and scores, exactly), loaded
# otherwise widened; converted back to float32 they are the widened values, scales gone
gpt-ckpt convert -q --dtype int8 --strip-optimizer o/latest.safetensors -o q.safetensors
gpt-ckpt info q.safetensors | grep -E '^(parameters:|(q8_0\.)?transformer\.(wte|h\.0\.attn\.c_attn|h\.0\.ln_1)\.weight )'
gpt-ckpt export q.safetensors --hf hf 2>&1 || echo "exit $?"
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype int8 -m q.safetensors | cmp - s1 &&
  echo "converted: the same int8 samples"
gpt-evalppl -q --json --context 8 --dtype int8 -m q.safetensors d/val.bin | cmp - q8.json &&
  echo "converted: the same int8 scores"
gpt-evalppl -q --json --context 8 -m q.safetensors d/val.bin > w.json
jq -n --slurpfile a f32.json --slurpfile b w.json \
  '(($a[0].nll - $b[0].nll) / $a[0].nll | fabs) < 0.005'
gpt-ckpt convert -q --dtype float32 q.safetensors -o back.safetensors
gpt-ckpt info back.safetensors | grep -c '^q8_0\.' || true
gpt-evalppl -q --json --context 8 -m back.safetensors d/val.bin | cmp - w.json &&
  echo "back to float32: the widened weights"
gpt-sample -q -n 5 --seed 7 -p 'ROMEO:' --dtype int8 --device ref > r
head -c 6 r; echo
gpt-train -q "${TINY[@]}" --n_embd=48 --max_iters=1 --eval_interval=1 --out_dir=o48 > train48.log
gpt-sample -q -n 3 --dtype int8 -m o48/latest.safetensors > out 2> err && echo "exit 0" || echo "exit $?"
sed 's/^gpt-sample: //' err
# the help says where int8 runs (it said "cpu only" while ref ran it too); cuda refuses it
for tool in gpt-sample gpt-evalppl; do $tool --help | grep -o 'on the CPU backends only: cpu and ref, not cuda'; done
gpt-sample -q -n 3 --dtype int8 --device cuda-emu > out 2> err && echo "exit 0" || echo "exit $?"
sed 's/^gpt-sample: //' err
