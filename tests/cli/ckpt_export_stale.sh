# gpt-ckpt export --hf into a directory holding an earlier export (issue 23): a model without a
# BPE vocabulary (none embedded here; a char-level one takes the same path) removes the earlier
# export's vocab.json, merges.txt and tokenizer.json (transformers would have paired the model
# with that tokenizer), says so, and warns of tokenizer files gptkit never writes; a model with
# one replaces them.
source "$TOP/tests/cli/lib.bash"
export HF_HOME=$PWD/hf; unset GPT_VOCAB
gpt-ckpt import -q "$FIX/hf_tiny" -o bpe.safetensors
gpt-ckpt export -q bpe.safetensors --llmc a.bin
gpt-ckpt import -q a.bin -o novocab.safetensors 2>/dev/null
gpt-ckpt export -q bpe.safetensors --hf out
cp out/vocab.json vocab.ref
ls out
echo "== a model without a vocabulary into it"
gpt-ckpt export novocab.safetensors --hf out 2>&1 | sed "s|$PWD/||g"
ls out
jq -c '[.bos_token_id, .eos_token_id]' out/config.json
echo "== back to the BPE model, with a tokenizer_config.json of another origin"
echo '{}' > out/tokenizer_config.json
gpt-ckpt export bpe.safetensors --hf out 2>&1 | sed "s|$PWD/||g"
cmp out/vocab.json vocab.ref && echo "vocab.json: the model's own"
ls out
