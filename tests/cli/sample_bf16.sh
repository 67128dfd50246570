# --dtype bf16 (weights kept as bf16, fp32 activations) on a tiny char-level model: gpt-evalppl's
# NLL within bf16 rounding of the fp32 one (relative 2^-6: see tests/unit/test_infer.c), the same
# token count; gpt-sample runs and is deterministic; nanoGPT's names (float32, bfloat16) and the
# short ones (fp32, bf16) are the same dtype in both tools; a bad --dtype is a usage error, said
# before any file is opened (float16: sample_f16).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_scored
gpt-evalppl -q --json --dtype bf16 t.txt > bf16.json
jq -r '.tokens' f32.json bf16.json
nll_within f32.json bf16.json 0.015625
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype bf16 > s1
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype bf16 > s2
cmp s1 s2 && echo "bf16: same seed, same output"
head -c 6 s1; echo
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype bfloat16 | cmp - s1 && echo "bfloat16 = bf16"
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' > f1
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --dtype float32 | cmp - f1 && echo "float32 = default"
gpt-evalppl -q --json --dtype bfloat16 t.txt | cmp - bf16.json && echo "evalppl: bfloat16 = bf16"
gpt-evalppl -q --json --dtype fp32 t.txt | cmp - f32.json && echo "evalppl: fp32 = default"
for d in half int4; do
  gpt-sample -q -n 3 --dtype $d > out 2> err && echo "exit 0" || echo "exit $?"
  sed 's/^gpt-sample: //' err
done
gpt-evalppl -m nope.safetensors --dtype half t.txt 2>&1 >/dev/null || echo "exit $?"
