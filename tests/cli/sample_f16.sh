# --dtype float16 (weight matrices kept as IEEE fp16, fp32 activations, CPU only) on a tiny
# char-level model: gpt-evalppl's NLL within fp16 rounding of the fp32 one (relative 2^-8: see
# tests/unit/test_infer_f16.c), the same token count; greedy gpt-sample gives fp32's text; the
# fp16 checkpoint gpt-ckpt convert writes (F16 tensors: wpe and LayerNorm rounded too) scores
# within fp16 rounding with --dtype float16 and with the default float32 (its weights widened),
# and samples greedily fp32's text; the reference backend runs fp16 weights; fp16 and float16 are
# one dtype, half is not one.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_scored
gpt-evalppl -q --json --dtype float16 t.txt > f16.json
jq -r '.tokens' f32.json f16.json
nll_within f32.json f16.json 0.00390625
gpt-evalppl -q --json --dtype fp16 t.txt | cmp - f16.json && echo "evalppl: fp16 = float16"
gpt-sample -q -n 40 -t 0 -p 'ROMEO:' > g32
gpt-sample -q -n 40 -t 0 -p 'ROMEO:' --dtype float16 > g16
cmp g32 g16 && echo "greedy: float16 = float32"
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype fp16 > s1
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype float16 | cmp - s1 && echo "sample: fp16 = float16"
gpt-ckpt convert -q --dtype float16 o/latest.safetensors -o h.safetensors
gpt-ckpt info --json h.safetensors | jq -r '.dtype'
gpt-sample -q -n 40 -t 0 -p 'ROMEO:' --dtype float16 -m h.safetensors | cmp - g32 &&
  echo "converted: greedy = float32"
for d in float16 float32; do
  gpt-evalppl -q --json --dtype $d -m h.safetensors t.txt > h.json
  nll_within f32.json h.json 0.00390625
done
gpt-sample -q -n 5 --seed 7 -p 'ROMEO:' --dtype float16 --device ref > r
head -c 6 r; echo
gpt-sample -q -n 3 --dtype half > out 2> err && echo "exit 0" || echo "exit $?"
sed 's/^gpt-sample: //' err
