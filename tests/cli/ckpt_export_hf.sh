# gpt-ckpt export --hf with transformers itself: tests/ref/hf_export.py --check loads each export
# of tests/cli/ckpt_export_cases.bash (with biases, bias = false with zero biases, bfloat16) in
# GPT2LMHeadModel and GPT2Tokenizer, compares logits with references from the fixture's own
# transformers model, gptkit's loss with transformers', and the exports with the committed
# expectations that tests/cli/ckpt_export_ref.sh checks without torch.
# Runs where torch, transformers and numpy are importable by $GPT_TORCH_PYTHON, python3 or
# /usr/bin/python3 (exit 77 = skipped otherwise).
source "$TOP/tests/cli/lib.bash"
py=
for p in ${GPT_TORCH_PYTHON:-} python3 /usr/bin/python3; do
  if "$p" -c 'import torch, transformers, numpy' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "torch + transformers not importable (pip install torch transformers numpy; set GPT_TORCH_PYTHON)" >&2; exit 77; }
TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false \
  "$py" "$TOP/tests/ref/hf_export.py" --check 2> py.err || { cat py.err >&2; exit 1; }
