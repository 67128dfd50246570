# gpt-ckpt export --hf checked against transformers without torch: the exports of
# tests/cli/ckpt_export_cases.bash (with biases, bias = false written with zero biases, bfloat16)
# must be the ones tests/ref/hf_export.py loaded in transformers and recorded in
# tests/fixtures/hf_export.json (config.json, files, tensor names, dtypes, shapes and bytes), and
# gptkit's loss on each exported checkpoint must be the loss transformers computed from its export.
# (tests/cli/ckpt_export_hf.sh repeats the transformers side where torch is installed.)
source "$TOP/tests/cli/lib.bash"
source "$TOP/tests/cli/ckpt_export_cases.bash"
export_cases m
python3 "$TOP/tests/cli/ckpt_export_expect.py" --compare "$FIX/hf_export.json" m "${EXPORT_CASES[@]}"
T=$(od -An -td4 -j8 -N4 "$FIX/hf_tiny/logits.bin" | tr -d ' ')
# the fixture's input ids (int32 after the 32-byte header) as a header-less uint16 file
od -An -v -td4 -j32 -N$((4 * T)) "$FIX/hf_tiny/logits.bin" |
  awk '{for (i = 1; i <= NF; i++) printf "%c%c", $i % 256, int($i / 256)}' LC_ALL=C > ids.raw
for c in "${EXPORT_CASES[@]}"; do
  got=$(gpt-evalppl -q --raw --json -m "m/$c.safetensors" --context "$T" ids.raw | jq -r .nll)
  want=$(jq -r ".cases.$c.transformers_loss" "$FIX/hf_export.json")
  same=$(awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; if (d < 0) d = -d; print d < 1e-5 * w }')
  [ "$same" = 1 ] && echo "$c: gptkit's loss equals transformers' loss" ||
    echo "$c: gptkit's loss $got, transformers' $want"
done
