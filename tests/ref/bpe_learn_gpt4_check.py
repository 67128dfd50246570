#!/usr/bin/env python3
"""bpe_learn_gpt4_check.py: an independent check of bpe_learn.py's GPT-4 fixtures (not a fixture
writer). Per gpt4 corpus (prose, code, runs) it trains the tokenizer again as bpe_learn.py does,
checks it against NAME-gpt4.merges.gz and NAME-gpt4.held.ids, then builds a tiktoken Encoding
from its vocabulary (pat_str GPT4, ranks in gpt-tokenize's numbering: the 256 bytes first, then
merge order, <|endoftext|> the special) and checks that tiktoken's encode (allowed_special="all")
gives tokenizers' ids on the held-out text, the corpus and a Unicode-whitespace string. It also
compares the pre-tokenization alone: tokenizers' pre_tokenize_str pieces (back to text through
GPT-2's byte alphabet) against the `regex` module's findall(GPT4) on the same texts. Differences
are reported with the first differing piece or token; exit status 1 if any.

Run: python3 tests/ref/bpe_learn_gpt4_check.py [DATA_DIR]  (pip install tokenizers tiktoken
regex; DATA_DIR default ../shared/data)."""
import glob
import gzip
import os
import sys

import regex
import tiktoken

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe_learn import (GPT4, OUT, STYLES, TOP, byte_alphabet, corpora, merges_of, our_ids,
                       pre_tokenizer, train)

UNICODE_WS = ("a\u0085b \u00a0c\u1680d\u2000e\u200bf\u180eg\u3000\u3000h\n\n  \n x\r\n\r\ny "
              "123456789 'S 'LL \u017f")
UNBYTE = {c: b for b, c in byte_alphabet().items()}


def to_bytes(s):
    """A token or piece in GPT-2's byte alphabet -> its bytes."""
    return bytes(UNBYTE[c] for c in s)


def first_diff(a, b):
    """Index of the first place two sequences differ, or None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def report(what, a, b, an, bn, show=repr):
    i = first_diff(a, b)
    if i is None:
        print(f"  ok   {what}: {len(a)} equal")
        return True
    print(f"  DIFF {what}: {an} {len(a)}, {bn} {len(b)}, first difference at #{i}:")
    for name, seq in ((an, a), (bn, b)):
        print(f"         {name}: {' '.join(show(x) for x in seq[max(0, i - 2):i + 3])}"
              f"   (#{i}: {show(seq[i]) if i < len(seq) else 'end'})")
    return False


def check_pretok(texts):
    """tokenizers' GPT-4 pre-tokenizer vs regex.findall(GPT4)."""
    pre = pre_tokenizer("-gpt4")
    ok = True
    for what, text in texts:
        ours = [to_bytes(p).decode("utf-8") for p, _ in pre.pre_tokenize_str(text)]
        ok &= report(f"pre-tokens, {what}", ours, regex.findall(GPT4, text),
                     "tokenizers", "regex")
    return ok


def check_encode(name, text, held):
    tok = train(text, "-gpt4")
    merges = merges_of(tok)
    ids = our_ids(merges)
    held_ids = [ids[t] for t in tok.encode(held).tokens]
    with gzip.open(os.path.join(OUT, name + "-gpt4.merges.gz"), "rt", encoding="utf-8",
                   newline="") as f:
        fixture_merges = [line.rstrip("\n").split(" ") for line in f]
    with open(os.path.join(OUT, name + "-gpt4.held.ids")) as f:
        fixture_ids = [int(x) for x in f.read().split()]
    ok = report(f"{name}: merges vs fixture", merges, fixture_merges, "trained", "fixture")
    ok &= report(f"{name}: held-out ids vs fixture", held_ids, fixture_ids, "trained", "fixture",
                 str)
    eot = ids["<|endoftext|>"]
    enc = tiktoken.Encoding(name="x", pat_str=GPT4,
                            mergeable_ranks={to_bytes(t): i for t, i in ids.items() if i != eot},
                            special_tokens={"<|endoftext|>": eot})
    for what, s in (("held-out", held), ("corpus", text), ("unicode whitespace", UNICODE_WS)):
        hf = [ids[t] for t in tok.encode(s).tokens]
        ok &= report(f"{name}: tiktoken vs tokenizers, {what}", enc.encode(s, allowed_special="all"),
                     hf, "tiktoken", "tokenizers", str)
    return ok


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "..", "shared", "data")
    held = "".join(open(p, encoding="utf-8", newline="").read()
                   for p in sorted(glob.glob(os.path.join(data, "tokenizer-cases", "*.txt"))))
    texts = [(n, t) for n, t, _ in corpora(data) if n in STYLES["-gpt4"]]
    print("pre-tokenization (tokenizers Split+ByteLevel vs regex.findall):")
    ok = check_pretok([("held-out", held)] + [("corpus " + n, t) for n, t in texts]
                      + [("unicode whitespace", UNICODE_WS)])
    for name, text in texts:
        print(f"{name}-gpt4:")
        ok &= check_encode(name, text, held)
    print("all equal" if ok else "DIFFERENCES (above)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
