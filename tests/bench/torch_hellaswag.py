#!/usr/bin/python3
"""torch_hellaswag.py: items/s of HellaSwag scoring in PyTorch as llm.c's dev/data/hellaswag.py
(and build-nanogpt) does it, beside gpt-evalppl --hellaswag in make bench: per item, tiktoken's
encoding of ctx and of " " + each ending, the rows padded into one batch, one forward (the model
of tests/ref/gpt2_tiny_ref.py: GPT-2 124M, random weights), the cross-entropy of each ending's
tokens summed and averaged. Run with Debian's torch and tiktoken:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \\
        /usr/bin/python3 tests/bench/torch_hellaswag.py VOCAB_DIR ITEMS.jsonl [threads]
(VOCAB_DIR: GPT-2's encoder.json and vocab.bpe, from which tiktoken's "gpt2" is built offline.)
Prints: torch-hellaswag: N items in S s (R items/s), T threads
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "ref"), HERE]
from gpt2_tiny_ref import GPT  # noqa: E402
from hellaswag_tiny import rows_of  # noqa: E402
from tokenize_tiktoken import local_gpt2  # noqa: E402


def score(model, enc, item):
    tokens, mask = rows_of(enc.encode, item)
    logits, _ = model(tokens, tokens)
    losses = F.cross_entropy(logits[:, :-1, :].reshape(-1, logits.size(-1)),
                             tokens[:, 1:].reshape(-1), reduction="none").view(tokens.size(0), -1)
    shift = mask[:, 1:]
    sums = (losses * shift).sum(dim=1)
    return int(sums.argmin()), int((sums / shift.sum(dim=1)).argmin())


def main():
    vocab, path = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    torch.set_num_threads(threads)
    cfg = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257, bias=True)
    torch.manual_seed(1337)
    model = GPT(cfg).eval()
    enc = local_gpt2(vocab)
    with open(path, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    with torch.no_grad():
        score(model, enc, items[0])  # warm-up
        t0 = time.perf_counter()
        for item in items:
            score(model, enc, item)
        secs = time.perf_counter() - t0
    print("torch-hellaswag: %d items in %.3f s (%.2f items/s), %d threads"
          % (len(items), secs, len(items) / secs, threads))


if __name__ == "__main__":
    main()
