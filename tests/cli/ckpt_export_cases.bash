# ckpt_export_cases.bash: the models whose gpt-ckpt export --hf is checked against transformers,
# made the same way by the CI test (tests/cli/ckpt_export_ref.sh, against the committed
# expectations) and by the script that makes those expectations with transformers
# (tests/ref/hf_export.py, which also runs under tests/cli/ckpt_export_hf.sh where torch is).
# export_cases DIR: with the tools on PATH and TOP the source tree, writes into DIR
#   bias.safetensors    the tiny HuggingFace fixture (tests/fixtures/hf_tiny) imported
#   nobias.safetensors  the same without its biases (bias = false, tests/cli/ckpt_nobias.py)
#   bf16.safetensors    bias.safetensors with its parameters as bfloat16
# and each one's export as CASE.hf/ (config.json, model.safetensors, vocab.json, ...).
EXPORT_CASES=(bias nobias bf16)
export_cases() {
  local d=$1
  mkdir -p "$d"
  gpt-ckpt import -q "$TOP/tests/fixtures/hf_tiny" -o "$d/bias.safetensors"
  python3 "$TOP/tests/cli/ckpt_nobias.py" "$d/bias.safetensors" "$d/nobias.safetensors"
  gpt-ckpt convert -q "$d/bias.safetensors" --dtype bfloat16 -o "$d/bf16.safetensors"
  local c
  for c in "${EXPORT_CASES[@]}"; do gpt-ckpt export -q "$d/$c.safetensors" --hf "$d/$c.hf"; done
}
