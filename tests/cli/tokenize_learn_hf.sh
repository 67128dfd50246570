# A vocabulary learned by gpt-tokenize --learn (GPT-2's pattern, then GPT-4's), through a model
# trained on it and exported by gpt-ckpt export --hf: transformers' AutoTokenizer loads the
# export (GPT2Tokenizer from vocab.json + merges.txt; for GPT-4's pattern tokenizer.json, as
# tokenizer_config.json says) and PreTrainedTokenizerFast the learned directory's
# tokenizer.json, and both encode a text to the ids gpt-tokenize gives it; gpt-sample continues
# a prompt it encodes with the checkpoint's vocabulary. Runs where transformers is importable by $GPT_TORCH_PYTHON,
# python3 or /usr/bin/python3 (PyTorch not needed; exit 77 = skipped otherwise).
source "$TOP/tests/cli/lib.bash"; need_data
py=
for p in ${GPT_TORCH_PYTHON:-} python3 /usr/bin/python3; do
  if "$p" -c 'import transformers' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "transformers not importable (pip install transformers)" >&2; exit 77; }
head -c 200000 "$DATA/tinyshakespeare/input.txt" > in.txt
tail -c 6000 "$DATA/tinyshakespeare/input.txt" > t.txt
for pat in gpt2 gpt4; do
  gpt-tokenize -q --learn 1000 --pattern $pat --vocab-out voc$pat in.txt
  gpt-tokenize -q -V voc$pat in.txt -o train.bin --val-fraction 0.1
  gpt-train -q --train_data=train.bin --val_data=train_val.bin --vocab=voc$pat --n_layer=1 \
    --n_head=2 --n_embd=32 --block_size=32 --batch_size=2 --max_iters=2 --eval_interval=100 \
    --eval_iters=1 --out_dir=o$pat --threads=1 > /dev/null
  gpt-ckpt export -q o$pat/latest.safetensors --hf hf$pat
  gpt-ckpt info o$pat/latest.safetensors | grep '^tokenizer:' | sed 's/fingerprint [0-9]*/F/'
  gpt-sample -q -m o$pat/latest.safetensors -n 8 --seed 1 --prompt "First Citizen" > s.txt &&
    grep -q '^First Citizen' s.txt && echo "gpt-sample: the prompt continued"
  gpt-tokenize -q -V voc$pat t.txt -o t.bin
  ids t.bin | cut -d' ' -f2- > want$pat.txt
  n=$(gpt-evalppl -q --json -m o$pat/latest.safetensors t.txt | jq .tokens)
  [ "$n" = "$(wc -w < want$pat.txt)" ] && echo "gpt-evalppl: the text's tokens of gpt-tokenize"
done
TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false "$py" - t.txt \
  2> py.err <<'PY' || { cat py.err >&2; exit 1; }
import sys
from transformers import AutoTokenizer, PreTrainedTokenizerFast
text = open(sys.argv[1], encoding="utf-8", newline="").read()
for pat in ("gpt2", "gpt4"):
    want = open("want" + pat + ".txt").read().split()
    for name, tok in (("AutoTokenizer of the export", AutoTokenizer.from_pretrained("hf" + pat)),
                      ("PreTrainedTokenizerFast of tokenizer.json",
                       PreTrainedTokenizerFast(tokenizer_file="voc" + pat + "/tokenizer.json"))):
        ids = [str(i) for i in tok(text)["input_ids"]]
        print(f"{pat}: {name}: {'the ids of gpt-tokenize' if ids == want else 'OTHER IDS'}")
PY
