#!/usr/bin/python3
"""torch_step.py: median ms per training step (forward + backward + AdamW) of the nanoGPT-style
model of tests/ref/gpt2_tiny_ref.py in PyTorch, for the configs of tests/bench/train_step.c, so
the two are measured side by side. Run with Debian's torch (/usr/bin/python3), unpinned OpenBLAS:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
        /usr/bin/python3 tests/bench/torch_step.py S [steps] [threads]
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from gpt2_tiny_ref import GPT  # noqa: E402


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "S"
    S = which != "M"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else (30 if S else 8)
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    torch.set_num_threads(threads)
    cfg = (dict(n_layer=4, n_head=4, n_embd=128, block_size=64, vocab_size=65, bias=True) if S else
           dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257, bias=True))
    B, T = (12, 64) if S else (4, 64)
    torch.manual_seed(1337)
    model = GPT(cfg)
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    x = torch.randint(0, cfg["vocab_size"], (B, T))
    y = torch.randint(0, cfg["vocab_size"], (B, T))
    ms = []
    for s in range(steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        ms.append((time.perf_counter() - t0) * 1e3)
    print("torch %s: B=%d T=%d, %d threads: median %.2f ms/step (min %.2f), loss %.4f" % (
        which, B, T, threads, statistics.median(ms[2:]), min(ms[2:]), loss.item()))


if __name__ == "__main__":
    main()
