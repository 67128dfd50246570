#!/usr/bin/env python3
"""bpe_learn.py: HuggingFace tokenizers' BpeTrainer on four corpora, for gpt-tokenize --learn's
test (tests/cli/tokenize_learn.sh). Byte-level BPE as gpt-tokenize learns it: GPT-2's
pre-tokenizer regex (ByteLevel, use_regex, no prefix space), the 256 bytes as the initial
alphabet, <|endoftext|> the special token, vocab_size 32000, each corpus one sequence (as
gpt-tokenize reads a file: one document). Corpora: prose (../shared/data's Tiny Shakespeare, read
by path), code (this repository's C sources at the time the fixtures were made), CJK text and
long runs of one character (both drawn from a seeded generator); the last three are written to
tests/fixtures/bpe_learn/NAME.txt.gz. Per corpus: NAME.merges.gz, the merges in order ("A B" in
GPT-2's byte alphabet; a smaller vocabulary's are their first lines), and NAME.held.ids, the ids
tokenizers' trained tokenizer gives the held-out text (../shared/data/tokenizer-cases/*.txt,
concatenated in name order; its literal <|endoftext|> the special token, as gpt-tokenize
--allow-special encodes it), in gpt-tokenize's numbering: the 256 bytes in GPT-2's alphabet
order, then each merge's token when first made, <|endoftext|> last.

The same again with GPT-4's pre-tokenizer (tiktoken cl100k_base's pattern, GPT4 below: a Split
on the regex, isolated, then ByteLevel without its own regex), everything else as above, for
prose, code and runs (not cjk): NAME-gpt4.merges.gz and NAME-gpt4.held.ids, same formats.
(tests/ref/bpe_learn_gpt4_check.py checks these tokenizers against tiktoken and `regex`.)

Run: python3 tests/ref/bpe_learn.py [DATA_DIR]  (pip install tokenizers; DATA_DIR default
../shared/data)."""
import glob
import gzip
import os
import random
import sys

from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(TOP, "tests", "fixtures", "bpe_learn")
VOCAB = 32000
# GPT-4's pre-tokenizer (tiktoken cl100k_base's pat_str).
GPT4 = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
# Pre-tokenizers: fixture suffix -> corpora it is trained on (None: all).
STYLES = {"": None, "-gpt4": ("prose", "code", "runs")}


def byte_alphabet():
    """GPT-2's bytes_to_unicode: byte -> character."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def corpora(data):
    r = random.Random(41)
    code = []
    for path in sorted(glob.glob(os.path.join(TOP, "kernels", "model", "*.c")))[:6]:
        code.append(open(path, encoding="utf-8", newline="").read())
    cjk_chars = [chr(c) for c in range(0x4E00, 0x4F00)] + ["\u3002", "\uff0c", "\u3001"]
    cjk = "".join("\n" if r.random() < 0.04 else r.choice(cjk_chars) for _ in range(60000))
    runs = "".join(c * r.randint(1, 400) + r.choice(" \n")
                   for c in r.choices("aab \n=-_.0\u00e9", k=1500))
    return [("prose", open(os.path.join(data, "tinyshakespeare", "input.txt"), newline="",
                           encoding="utf-8").read(), False),
            ("code", "".join(code), True), ("cjk", cjk, True), ("runs", runs, True)]


def pre_tokenizer(style):
    """"": GPT-2's (ByteLevel's own regex); "-gpt4": GPT4 split, then ByteLevel without regex."""
    if style == "-gpt4":
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT4), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def train(text, style=""):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer(style)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text], trainer)
    return tok


def merges_of(tok):
    import json
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [m.split(" ") if isinstance(m, str) else m for m in merges]


def our_ids(merges):
    alpha = byte_alphabet()
    ids = {alpha[b]: i for i, b in enumerate(sorted(alpha, key=lambda b: ord(alpha[b])))}
    for a, b in merges:
        ids.setdefault(a + b, len(ids))
    ids["<|endoftext|>"] = len(ids)
    return ids


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "..", "shared", "data")
    held = "".join(open(p, encoding="utf-8", newline="").read()
                   for p in sorted(glob.glob(os.path.join(data, "tokenizer-cases", "*.txt"))))
    os.makedirs(OUT, exist_ok=True)
    for name, text, keep in corpora(data):
        if keep:
            with gzip.GzipFile(os.path.join(OUT, name + ".txt.gz"), "wb", mtime=0) as f:
                f.write(text.encode("utf-8"))
        for style, names in STYLES.items():
            if names is not None and name not in names:
                continue
            tok = train(text, style)
            merges = merges_of(tok)
            base = os.path.join(OUT, name + style)
            with gzip.GzipFile(base + ".merges.gz", "wb", mtime=0) as f:
                f.write("".join(a + " " + b + "\n" for a, b in merges).encode("utf-8"))
            ids = our_ids(merges)
            held_ids = [ids[t] for t in tok.encode(held).tokens]
            with open(base + ".held.ids", "w") as f:
                f.write(" ".join(map(str, held_ids)) + "\n")
            print(f"{name}{style}: {len(text.encode('utf-8'))} bytes, {len(merges)} merges, "
                  f"{len(held_ids)} held-out tokens")


if __name__ == "__main__":
    main()
