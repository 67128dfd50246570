#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/vocab (see fuzz_vocab.c for the layout: a format byte, the files, the
# text): GPT-2's first 300 tokens and their 44 merges (a slice of ../shared/data/gpt2) as
# encoder.json + vocab.bpe, vocab.json + merges.txt (CRLF, with <|endoftext|>), memory texts and
# .tiktoken; char vocabularies written by gpt-tokenize --char --vocab-out; two broken files.
# Usage: tests/fuzz/seed_vocab.sh [BUILD]   (needs ../shared/data/gpt2)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:-$top/build}" && pwd)/bin
out=$top/tests/fuzz/corpus/vocab
gpt2=${GPT_TEST_DATA:-$top/../shared/data}/gpt2
rm -rf "$out" && mkdir -p "$out"
python3 - "$gpt2" "$out" <<'EOF'
import base64, json, sys
gpt2, out = sys.argv[1], sys.argv[2]
enc = json.load(open(f"{gpt2}/encoder.json", encoding="utf-8"))
small = {k: i for k, i in enc.items() if i < 300}
merges = open(f"{gpt2}/vocab.bpe", encoding="utf-8").read().split("\n")[:45]
bs = [b for r in ((33, 127), (161, 173), (174, 256)) for b in range(*r)]
alphabet, extra = {}, 0
for b in range(256):
    alphabet[chr(b) if b in bs else chr(256 + extra)] = b
    extra += b not in bs
def raw(key): return bytes(alphabet[c] for c in key)
text = "Hello, world! The rain in Spain <|endoftext|> 123 caf\u00e9\n".encode()
def seed(name, flags, *parts):
    with open(f"{out}/{name}", "wb") as f:
        f.write(bytes([flags]) + b"\0".join(parts))
j = json.dumps(small).encode()
m = "\n".join(merges).encode() + b"\n"
seed("openai", 0, j, m, text)
seed("hf_crlf_eot", 1 | 1 << 3, json.dumps(dict(small, **{"<|endoftext|>": 300})).encode(),
     m.replace(b"\n", b"\r\n"), text)
seed("mem_no_merges", 2 | 3 << 3, j, b"", text + b"\xff\xc3")
seed("mem_bad_merge", 2, j, m + "\u0120t he\n".encode(), text)
tik = b"".join(base64.b64encode(raw(k)) + b" %d\n" % i for k, i in sorted(small.items(), key=lambda x: x[1]))
seed("tiktoken", 3 | 2 << 3, tik, text)
seed("tiktoken_gap", 3, tik.replace(b" 5\n", b" 301\n"), text)
EOF
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
char_seed() { # NAME FLAGS VOCAB_TEXT TEXT (format 2: an empty merges text before TEXT)
  printf '%s' "$3" | "$bin/gpt-tokenize" -q --char --vocab-out "$tmp/v.json" -o "$tmp/ids.bin"
  { printf "\\x$(printf %02x "$2")"; cat "$tmp/v.json"; printf '\0'
    [ $(($2 & 7)) = 2 ] && printf '\0'; printf '%s' "$4"; } >"$out/$1"
}
char_seed char 4 $'First Citizen:\nBefore we proceed any further, hear me speak.\n' $'Before we speak\n'
char_seed char_unicode 4 $'caf\u00e9 na\u00efve \u65e5\u672c \U0001F600\n' $'caf\u00e9 \u65e5\n'
char_seed mem_char 2 $'abc xyz\n' $'zyx cba\nq'
