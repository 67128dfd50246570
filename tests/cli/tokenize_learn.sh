# gpt-tokenize --learn N --vocab-out DIR: byte-level BPE learned as HuggingFace tokenizers'
# BpeTrainer learns it (tests/ref/bpe_learn.py made the fixtures with tokenizers 0.21 and 0.23):
# on prose, code, CJK text and long runs of one character, and with GPT-4's pattern (--pattern
# gpt4) on prose, code and runs, at 300, 4000 and 32000 tokens, the merges are
# tokenizers' in the same order (a text that allows fewer: all of them, and a warning), and a
# held-out text (the tokenizer cases) encodes with the 32000 vocabulary to tokenizers' ids. End
# to end: a vocabulary learned, the text tokenized with it, a model trained, sampled, scored and
# exported (gpt-ckpt export --hf): tokenizers (pip, installed by .ci/run) reads the directory's
# tokenizer.json and the export's vocab.json + merges.txt and encodes a text to gpt-tokenize's
# ids. --special: more special tokens. Bad input: one line naming it, and no directory.
source "$TOP/tests/cli/lib.bash"; need_data
F=$TOP/tests/fixtures/bpe_learn
cat "$DATA"/tokenizer-cases/*.txt > held.txt
for c in prose code cjk runs prose-gpt4 code-gpt4 runs-gpt4; do
  in=$F/${c%-gpt4}.txt.gz; [[ $c != prose* ]] || in=$DATA/tinyshakespeare/input.txt
  pat=gpt2; [[ $c != *-gpt4 ]] || pat=gpt4
  zcat "$F/$c.merges.gz" > want.txt
  for n in 300 4000 32000; do
    gpt-tokenize --learn $n --pattern $pat --vocab-out v$c$n "$in" 2> err.txt
    tail -n +2 v$c$n/vocab.bpe > got.txt
    m=$(wc -l < got.txt)
    head -n "$m" want.txt | cmp -s - got.txt && { [ $m -eq $((n - 257)) ] || [ $m -eq $(wc -l < want.txt) ]; } &&
      echo "$c, $n tokens: $m merges, tokenizers' own$(grep -o ': the text allows [0-9]* merges only' err.txt || true)"
  done
  gpt-tokenize -q --allow-special -V v${c}32000 held.txt -o h.bin
  ids h.bin | cut -d' ' -f2- > ids.txt # (after the document's <|endoftext|>)
  cmp -s ids.txt "$F/$c.held.ids" && echo "$c: held-out text encoded as tokenizers encodes it"
done

# the counting threads (-j) and the documents' batching change nothing: Tiny Shakespeare as one
# document on 1 and 3 threads, and as 40 documents (--doc-sep) whose blocks the threads share
P=$DATA/tinyshakespeare/input.txt
gpt-tokenize -q -j 1 --learn 4000 --vocab-out j1 "$P"
gpt-tokenize -q -j 3 --learn 4000 --vocab-out j3 "$P"
awk 'NR % 1000 == 0 { print "@@DOC@@" } { print }' "$P" > docs.txt
gpt-tokenize -q -j 1 --doc-sep $'@@DOC@@\n' --learn 4000 --vocab-out jd1 docs.txt
gpt-tokenize -q -j 3 --doc-sep $'@@DOC@@\n' --learn 4000 --vocab-out jd3 docs.txt
for j in j3 jd3; do
  cmp -s ${j%3}1/vocab.bpe $j/vocab.bpe && cmp -s ${j%3}1/encoder.json $j/encoder.json &&
    cmp -s ${j%3}1/tokenizer.json $j/tokenizer.json && echo "$j: the vocabulary of -j 1"
done
head -n 1 vprose-gpt432000/vocab.bpe # (GPT-4's pattern named; GPT-2's vocab.bpe line is as ever)
head -n 1 vprose32000/vocab.bpe
# --learn-memory: a bound the counts pass drops the rarest pre-tokens, says so, and still learns
gpt-tokenize -j 1 --learn-memory 1M --learn 1000 --vocab-out small "$P" 2>&1 |
  sed 's/dropped [0-9]* rare pre-tokens ([0-9]* occurrences)/dropped N rare pre-tokens (M occurrences)/; s/in [0-9.]* s:/in T s:/'
# --special: more special tokens after <|endoftext|>, within N: the merges of N less them, the
# specials the last ids, tokenizers' tokenizer.json taking them as special
gpt-tokenize -q --learn 1000 --special '<|pad|>' --special '<|sep|>' --vocab-out sp "$P"
zcat "$F/prose.merges.gz" > pw.txt
head -n 741 pw.txt | cmp -s - <(tail -n +2 sp/vocab.bpe) &&
  echo "--special twice: 741 merges, tokenizers' own"
grep -o '"<|endoftext|>": 997, "<|pad|>": 998, "<|sep|>": 999}$' sp/encoder.json
python3 -c 'import sys; from tokenizers import Tokenizer
print(Tokenizer.from_file(sys.argv[1]).encode("hello<|pad|> world<|sep|>").ids)' sp/tokenizer.json
# end to end on a vocabulary of 1000 learned from 200 kB of Tiny Shakespeare
head -c 200000 "$DATA/tinyshakespeare/input.txt" > in.txt
gpt-tokenize -q --learn 1000 --vocab-out voc in.txt
gpt-tokenize -q -V voc in.txt -o train.bin --val-fraction 0.1
gpt-train -q --train_data=train.bin --val_data=train_val.bin --vocab=voc --n_layer=2 --n_head=2 \
  --n_embd=32 --block_size=32 --batch_size=4 --max_iters=6 --eval_interval=3 --eval_iters=2 \
  --out_dir=o --threads=1 > /dev/null
gpt-sample -q -m o/latest.safetensors -n 20 --seed 1 > s.txt && test -s s.txt && echo "gpt-sample: text"
gpt-evalppl -q -m o/latest.safetensors in.txt | grep -q '^tokens 7' && echo "gpt-evalppl: scored"
gpt-ckpt export -q o/latest.safetensors --hf hf
cmp -s hf/vocab.json voc/encoder.json && cmp -s hf/merges.txt voc/vocab.bpe && echo "export --hf: the learned vocabulary"
head -c 20000 "$DATA/tinyshakespeare/input.txt" | tail -c 5000 > t.txt
gpt-tokenize -q -V voc t.txt -o t.bin
ids t.bin | cut -d' ' -f2- > want.txt
python3 - voc hf t.txt want.txt <<'PY'
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
voc, hf, text, want = sys.argv[1:]
text = open(text, encoding="utf-8", newline="").read()
want = open(want).read().split()
a = Tokenizer.from_file(voc + "/tokenizer.json")
b = Tokenizer(models.BPE.from_file(hf + "/vocab.json", hf + "/merges.txt"))
b.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
for name, t in (("tokenizer.json", a), ("the export's vocab.json + merges.txt", b)):
    ok = [str(i) for i in t.encode(text).ids] == want
    print(f"tokenizers with {name}: {'the same ids' if ok else 'OTHER IDS'}")
PY
# bad input: one line naming it, no directory made
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/in [0-9.]* s:/in T s:/' err.txt)"; }
run gpt-tokenize --learn 257 --vocab-out bad held.txt
run gpt-tokenize --learn 1000 held.txt
: > empty.txt
run gpt-tokenize --learn 1000 --vocab-out bad empty.txt
mkdir full && touch full/x
run gpt-tokenize --learn 1000 --vocab-out full held.txt
run gpt-tokenize --learn 1000 --special '<|a b|>' --vocab-out bad held.txt
run gpt-tokenize --learn 1000 --special '<|endoftext|>' --vocab-out bad held.txt
run gpt-tokenize --special '<|pad|>' held.txt -o bad.bin
run gpt-tokenize -j 1 --learn 2000 --special the --vocab-out bad "$P"
run gpt-tokenize --learn 258 --special '<|pad|>' --vocab-out bad held.txt
run gpt-tokenize --learn 1000 --pattern gpt5 --vocab-out bad held.txt
run gpt-tokenize --pattern gpt4 held.txt -o bad.bin
test ! -e bad && ls full && echo "no directory made; full/ untouched"
# SIGTERM while counting an endless stdin (once it has read a megabyte; a background job of a
# script ignores SIGINT, which takes the same path): death by the signal, neither the directory
# nor a temporary one left
yes 'to be, or not to be' | gpt-tokenize -q --learn 1000 --vocab-out sig - & pid=$!
while [ "$(awk '/^rchar/ { print $2 }' /proc/$pid/io 2> /dev/null || echo 0)" -lt 1000000 ]; do
  kill -0 $pid 2> /dev/null || break
done
kill -TERM $pid; rc=0; wait $pid || rc=$?
echo "SIGTERM: exit $rc; $(ls -d sig* 2> /dev/null | wc -l) directories left"
printf 'caf\xe9 ok \xff\xfe ok ok ok\n' > inv.txt
run gpt-tokenize --learn 262 --vocab-out inv inv.txt
tail -n +2 inv/vocab.bpe
