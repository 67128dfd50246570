# Many documents batched into one block of the encoder (small JSON Lines rows, archive members)
# and encoded in parallel: the tokens are those of each document encoded alone, for -j 1, 2
# and 8: empty documents, one-byte ones, invalid UTF-8 at a document's start and end, documents
# larger than a block among small ones, and a stretch without a safe cut (serial mode).
source "$TOP/tests/cli/lib.bash"; need_data
python3 - "$DATA/tinyshakespeare/input.txt" <<'PY'
import random, sys
text = open(sys.argv[1], "rb").read()
r = random.Random(7)
for i in range(36):
    kind = r.random()
    if kind < 0.1:
        data = b""
    elif kind < 0.2:
        data = bytes([r.choice(b"a \n\xff")])
    elif kind < 0.3:
        at = r.randrange(len(text) - 700000)
        data = text[at:at + r.randrange(300000, 700000)]  # -j 1's blocks are 512 kB
    elif kind < 0.35:
        data = b"x" * r.randrange(600000, 700000)  # no safe cut in a block: encoded serially
    else:
        at = r.randrange(len(text) - 5000)
        data = text[at:at + r.randrange(1, 5000)]
    if r.random() < 0.2:
        data = b"\xe2\x82" + data + b"\xc3"
    open("f%03d.txt" % i, "wb").write(data)
PY
tar cf all.tar f*.txt
for f in f*.txt; do gpt-tokenize -q -j 1 "$f" -o one.bin; ids one.bin; done | tr -s ' \n' '\n\n' > alone.txt
for j in 1 2 8; do
  gpt-tokenize -q -j $j all.tar -o t$j.bin
  ids t$j.bin | tr -s ' \n' '\n\n' | cmp - alone.txt && echo "-j $j: each document as if alone"
done
# the same as JSON Lines rows (invalid UTF-8 has no JSON form: replaced first, as Python does)
python3 -c '
import glob, json
for f in sorted(glob.glob("f*.txt")):
    print(json.dumps({"text": open(f, "rb").read().decode("utf-8", "replace")}))' > all.jsonl
gpt-tokenize -q -j 1 all.jsonl -o r1.bin; gpt-tokenize -q -j 8 all.jsonl -o r8.bin
cmp r1.bin r8.bin && cmp r1.bin t1.bin && echo "jsonl rows: the same tokens"
# empty documents just before a stretch with no safe cut: each keeps its <|endoftext|>
: > e1.txt; : > e2.txt; head -c 600000 /dev/zero | tr '\0' x > e3.txt; echo "after" > e4.txt
tar cf e.tar e1.txt e2.txt e3.txt e4.txt
gpt-tokenize -q -j 1 e.tar -o e.bin
for f in e1 e2 e3 e4; do gpt-tokenize -q -j 1 $f.txt -o one.bin; ids one.bin; done | tr -s ' \n' '\n\n' > e_alone.txt
ids e.bin | tr -s ' \n' '\n\n' | cmp - e_alone.txt && echo "empty documents before a serial stretch: as if alone"
