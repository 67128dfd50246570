#!/usr/bin/env python3
"""Reference side of the tokenizer benchmark: tiktoken's "gpt2" encoding, built from the
encoder.json/vocab.bpe given (no network), timed on one thread with encode_ordinary.
Usage: tokenize_tiktoken.py VOCAB_DIR TEXT [IDS_OUT]
Prints "MB/s tokens"; with IDS_OUT also writes the ids (uint32 little-endian) for comparison."""
import sys, time, array
import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

def local_gpt2(vocab):
    """tiktoken's "gpt2" from VOCAB_DIR's encoder.json and vocab.bpe (also torch_hellaswag.py's)."""
    ranks = data_gym_to_mergeable_bpe_ranks(f"{vocab}/vocab.bpe", f"{vocab}/encoder.json")
    return tiktoken.Encoding("gpt2-local", pat_str=PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})

def main():
    vocab, path = sys.argv[1], sys.argv[2]
    enc = local_gpt2(vocab)
    text = open(path, "rb").read().decode("utf-8", errors="replace")
    nbytes = len(text.encode("utf-8"))
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        ids = enc.encode_ordinary(text)
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    print(f"{nbytes / best / 1e6:.2f} {len(ids)}")
    if len(sys.argv) > 3:
        array.array("I", ids).tofile(open(sys.argv[3], "wb"))

if __name__ == "__main__":
    main()
