# gpt-evalppl on the tiny transformers fixture equals the loss transformers computed
# (labels = input ids) on the same 24 tokens, within float32 rounding.
source "$TOP/tests/cli/lib.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o m.safetensors
T=$(od -An -td4 -j8 -N4 "$FIX/hf_tiny/logits.bin" | tr -d ' ')
# the input ids (int32 after the 32-byte header) as a header-less uint16 file
od -An -v -td4 -j32 -N$((4 * T)) "$FIX/hf_tiny/logits.bin" |
  awk '{for (i = 1; i <= NF; i++) printf "%c%c", $i % 256, int($i / 256)}' LC_ALL=C > ids.raw
want=$(od -An -tf4 -j$((32 + 4 * T)) -N4 "$FIX/hf_tiny/logits.bin" | tr -d ' ')
gpt-evalppl -q --raw --json -m m.safetensors --context "$T" ids.raw > got.json
jq -r '.tokens' got.json
got=$(jq -r '.nll' got.json)
awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; if (d < 0) d = -d; print (d < 1e-5 * w ? "nll matches transformers" : "nll " g " != " w) }'
