#!/usr/bin/env bash
# make bench (BENCH=learn): gpt-tokenize --learn beside HuggingFace tokenizers' BpeTrainer and
# rustbpe (nanochat's trainer), both from PyPI (pip install tokenizers rustbpe; a missing one is
# skipped with its reason), on the same text, pattern (GPT-2's) and size (32000): 100 MB of text
# (Tiny Shakespeare 90 times: this machine has no larger corpus; its pre-tokens repeat, so the
# counting is a larger share than on web text), fed to the Python trainers as documents of 10 kB
# (a list in memory, as they are usually fed). Time, characters a second and peak resident memory
# (/usr/bin/time) of each: gptkit on 1 thread against tokenizers on 1 (RAYON_NUM_THREADS=1),
# and on 2 against rustbpe on 2. Then 1 GB (the same text 900 times) through stdin with the default
# --learn-memory: its peak memory.
# Usage: tests/bench/learn.sh BUILD (data: $GPT_TEST_DATA or ../shared/data).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
work="$build/bench/learn"; rm -rf "$work"; mkdir -p "$work"; cd "$work"
[ -x /usr/bin/time ] || { echo "learn: skipped (/usr/bin/time not installed: Debian package time)"; exit 0; }
for i in $(seq 90); do cat "$data/tinyshakespeare/input.txt"; done > text.txt
chars=$(python3 -c "print(len(open('text.txt', encoding='utf-8', newline='').read()))")
cat > trainers.py <<'PY'
import sys, time
which, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
text = open(path, encoding="utf-8", newline="").read()
docs = [text[i:i + 10000] for i in range(0, len(text), 10000)]
if which == "tokenizers":
    from tokenizers import Tokenizer, models, trainers, pre_tokenizers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.train_from_iterator(docs, trainers.BpeTrainer(
        vocab_size=n, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
else:
    import rustbpe
    rustbpe.Tokenizer().train_from_iterator(iter(docs), n, pattern=GPT2)
PY
row() { # NAME SECONDS-FILE RSS-FILE
  printf '%-34s %8.2f s %8.1f M chars/s %8.0f MB\n' "$1" "$(cat "$2")" \
    "$(echo "$chars / $(cat "$2") / 1000000" | bc -l)" "$(echo "$(cat "$3") / 1000" | bc -l)"; }
echo
printf '%-34s %10s %18s %11s\n' "100 MB, 32000 tokens" time speed "peak memory"
/usr/bin/time -f '%e' -o t0 /usr/bin/time -f '%M' -o m0 gpt-tokenize -q -j 1 --learn 32000 \
  --vocab-out v text.txt
row "gpt-tokenize --learn, 1 thread" t0 m0
/usr/bin/time -f '%e' -o t9 /usr/bin/time -f '%M' -o m9 gpt-tokenize -q -j 2 --learn 32000 \
  --vocab-out v2 text.txt
row "gpt-tokenize --learn, 2 threads" t9 m9
if python3 -c 'import tokenizers' 2> /dev/null; then
  RAYON_NUM_THREADS=1 /usr/bin/time -f '%e' -o t1 /usr/bin/time -f '%M' -o m1 \
    python3 trainers.py tokenizers text.txt 32000
  row "tokenizers BpeTrainer, 1 thread" t1 m1
  echo "gptkit: $(echo "$(cat t1) / $(cat t0)" | bc -l | cut -c1-5)x tokenizers' speed on 1 thread"
else echo "tokenizers: skipped (not installed: pip install tokenizers)"; fi
if python3 -c 'import rustbpe' 2> /dev/null; then
  RAYON_NUM_THREADS=2 /usr/bin/time -f '%e' -o t2 /usr/bin/time -f '%M' -o m2 \
    python3 trainers.py rustbpe text.txt 32000
  row "rustbpe, 2 threads" t2 m2
  echo "gptkit: $(echo "$(cat t2) / $(cat t9)" | bc -l | cut -c1-5)x rustbpe's characters/s on 2 threads"
else echo "rustbpe: skipped (not installed: pip install rustbpe)"; fi
echo "($(nproc) cores; the Python trainers' times include reading the text and cutting documents)"
echo
for i in $(seq 10); do cat text.txt; done | /usr/bin/time -f '%M' -o m3 \
  gpt-tokenize -q --learn 32000 --vocab-out v1g -
echo "1 GB through stdin, default --learn-memory: peak $(echo "$(cat m3) / 1000" | bc -l | cut -d. -f1) MB"
