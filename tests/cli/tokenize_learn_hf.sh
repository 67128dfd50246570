# A vocabulary learned by gpt-tokenize --learn, through a model trained on it and exported by
# gpt-ckpt export --hf: transformers' AutoTokenizer loads the export (vocab.json + merges.txt)
# and PreTrainedTokenizerFast the learned directory's tokenizer.json, and both encode a text to
# the ids gpt-tokenize gives it. Runs where transformers is importable by $GPT_TORCH_PYTHON,
# python3 or /usr/bin/python3 (PyTorch not needed; exit 77 = skipped otherwise).
source "$TOP/tests/cli/lib.bash"; need_data
py=
for p in ${GPT_TORCH_PYTHON:-} python3 /usr/bin/python3; do
  if "$p" -c 'import transformers' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "transformers not importable (pip install transformers)" >&2; exit 77; }
head -c 200000 "$DATA/tinyshakespeare/input.txt" > in.txt
gpt-tokenize -q --learn 1000 --vocab-out voc in.txt
gpt-tokenize -q -V voc in.txt -o train.bin --val-fraction 0.1
gpt-train -q --train_data=train.bin --val_data=train_val.bin --vocab=voc --n_layer=1 --n_head=2 --n_embd=32 \
  --block_size=32 --batch_size=2 --max_iters=2 --eval_interval=100 --eval_iters=1 --out_dir=o --threads=1 > /dev/null
gpt-ckpt export -q o/latest.safetensors --hf hf
tail -c 6000 "$DATA/tinyshakespeare/input.txt" > t.txt
gpt-tokenize -q -V voc t.txt -o t.bin
ids t.bin | cut -d' ' -f2- > want.txt
TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false "$py" - hf voc t.txt want.txt \
  2> py.err <<'PY' || { cat py.err >&2; exit 1; }
import sys
from transformers import AutoTokenizer, PreTrainedTokenizerFast
hf, voc, text, want = sys.argv[1:]
text = open(text, encoding="utf-8", newline="").read()
want = open(want).read().split()
for name, tok in (("AutoTokenizer of the export", AutoTokenizer.from_pretrained(hf)),
                  ("PreTrainedTokenizerFast of tokenizer.json",
                   PreTrainedTokenizerFast(tokenizer_file=voc + "/tokenizer.json"))):
    ids = [str(i) for i in tok(text)["input_ids"]]
    print(f"{name}: {'the ids of gpt-tokenize' if ids == want else 'OTHER IDS'}")
PY
