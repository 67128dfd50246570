#!/usr/bin/python3
"""torch_sample.py: tokens/s of nanoGPT-style generation in PyTorch, beside gpt-sample in make
bench: the model of tests/ref/gpt2_tiny_ref.py (GPT-2 124M, random weights), batch 1, a prompt
of P random tokens, N new tokens, as nanoGPT's generate does it: no KV cache, each new token is a
full forward over the (block_size-cropped) context, logits of the last position only (nanoGPT's
inference path), temperature 0.8, top-k 200, multinomial. Run with Debian's torch:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
        /usr/bin/python3 tests/bench/torch_sample.py [new_tokens] [threads] [prompt_tokens]
Prints: torch-sample: N tokens in S s (R tokens/s), 2 threads
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from gpt2_tiny_ref import GPT  # noqa: E402


def last_logits(model, idx):
    tr = model.transformer
    x = tr.wte(idx) + tr.wpe(torch.arange(idx.size(1)))
    for block in tr.h:
        x = block(x)
    return tr.ln_f(x[:, -1, :]) @ tr.wte.weight.t()


def main():
    n_new = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    n_prompt = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    torch.set_num_threads(threads)
    cfg = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257, bias=True)
    torch.manual_seed(1337)
    model = GPT(cfg).eval()
    idx = torch.randint(0, cfg["vocab_size"], (1, n_prompt))
    with torch.no_grad():
        last_logits(model, idx)  # warm-up
        t0 = time.perf_counter()
        for _ in range(n_new):
            cond = idx if idx.size(1) <= cfg["block_size"] else idx[:, -cfg["block_size"]:]
            logits = last_logits(model, cond) / 0.8
            v, _ = torch.topk(logits, 200)
            logits[logits < v[:, [-1]]] = -float("inf")
            nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat((idx, nxt), dim=1)
        secs = time.perf_counter() - t0
    print("torch-sample: %d tokens in %.3f s (%.1f tokens/s), %d threads" % (n_new, secs, n_new / secs, threads))


if __name__ == "__main__":
    main()
