#!/usr/bin/env python3
"""long_pieces.py: tiktoken's ids for very long pre-tokens (one letter repeated, random letters,
digits, spaces, punctuation, non-ASCII letters), as a count and a hash per case, written to
tests/fixtures/long_pieces.txt. test_bpe regenerates each text with the same generator and checks
gptkit's ids (whole, in windows, and streamed in parts) against these lines.

Run: python3 tests/ref/long_pieces.py [GPT2_DIR]  (needs tiktoken; GPT2_DIR holds encoder.json
and vocab.bpe, default ../shared/data/gpt2). Line format: NAME SEED LEN COUNT FNV1A64, where the
hash runs over the ids as little-endian uint32."""
import os
import sys

import tiktoken
import tiktoken.load

PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# name -> alphabet (UTF-8 strings); each case's text is LEN characters drawn from it by the
# xorshift64 generator below (one character when the alphabet has one).
ALPHABETS = {
    "a": ["a"], "letters": list("abcdefghijklmnopqrstuvwxyz"), "ab": ["a", "b"],
    "digits": list("0123456789"), "zeros": ["0"], "spaces": [" "], "newlines": ["\n"],
    "blanks": [" ", "\t", "\n"], "punct": list("!#$%&'()*+,-./:;<=>?@[]^_`{|}~"),
    "eacute": ["\u00e9"], "unicode": ["\u00e9", "\u00e0", "\u00fc", "\u00df", "\u4e2d", "\u6587", "a"],
}
CASES = [("a", 1, n) for n in (65535, 65536, 65537, 131075, 1000003, 5000000)] + [
    ("letters", 7, 1000000), ("ab", 8, 1000000), ("digits", 9, 1000000), ("zeros", 1, 300001),
    ("spaces", 1, 300000), ("newlines", 1, 200001), ("blanks", 10, 300000), ("punct", 11, 1000000),
    ("eacute", 1, 500000), ("unicode", 12, 400000), ("letters", 13, 70000), ("ab", 14, 150000),
]


def xorshift(seed):
    s = seed
    while True:
        s ^= (s << 13) & 0xFFFFFFFFFFFFFFFF
        s ^= s >> 7
        s ^= (s << 17) & 0xFFFFFFFFFFFFFFFF
        yield s


def text_of(name, seed, n):
    alpha = ALPHABETS[name]
    if len(alpha) == 1:
        return alpha[0] * n
    g = xorshift(seed)
    return "".join(alpha[next(g) % len(alpha)] for _ in range(n))


def fnv(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in i.to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, "..", "shared", "data", "gpt2")
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(os.path.join(d, "vocab.bpe"),
                                                          os.path.join(d, "encoder.json"))
    enc = tiktoken.Encoding("gpt2", pat_str=PAT, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    out = os.path.join(top, "tests", "fixtures", "long_pieces.txt")
    with open(out, "w") as f:
        for name, seed, n in CASES:
            ids = enc.encode_ordinary(text_of(name, seed, n))
            f.write(f"{name} {seed} {n} {len(ids)} {fnv(ids):016x}\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
