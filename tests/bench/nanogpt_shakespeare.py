#!/usr/bin/python3
"""nanogpt_shakespeare.py: the quality reference for train/configs/shakespeare.conf.

Trains nanoGPT's CPU example (4 layers, 4 heads, 128 wide, block 64, batch 12, 2000 iterations,
lr 1e-3 -> 1e-4 cosine, warmup 100, beta2 0.99, weight decay 0.1 on 2-D tensors, clip 1.0, no
dropout, no bias) in PyTorch with nanoGPT's train.py loop (random windows, get_lr), on the same
char-level shards gpt-train reads, and prints the val loss at the end estimated over EVAL_ITERS
random batches, so gpt-train's result can be compared on the same data and machine.

    /usr/bin/python3 tests/bench/nanogpt_shakespeare.py DATA_DIR [eval_iters] [seed]
"""
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from gpt2_tiny_ref import GPT  # noqa: E402


def load(path):
    raw = np.fromfile(path, dtype="<u2")
    return torch.from_numpy(raw[512:].astype(np.int64))  # skip the 1024-byte header


def main():
    data_dir = sys.argv[1]
    eval_iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1337
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    train, val = load(os.path.join(data_dir, "train.bin")), load(os.path.join(data_dir, "val.bin"))
    B, T, iters, lr, min_lr, warmup = 12, 64, 2000, 1e-3, 1e-4, 100
    model = GPT(dict(n_layer=4, n_head=4, n_embd=128, block_size=T, vocab_size=65, bias=False))
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99))

    def batch(d):
        ix = torch.randint(len(d) - T, (B,))
        return torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + 1 + T] for i in ix])

    def get_lr(it):
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        ratio = (it - warmup) / (iters - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)

    t0 = time.time()
    for it in range(iters):
        for g in opt.param_groups:
            g["lr"] = get_lr(it)
        x, y = batch(train)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    with torch.no_grad():
        vl = sum(model(*batch(val))[1].item() for _ in range(eval_iters)) / eval_iters
    print("torch nanoGPT: val loss %.4f after %d steps (%d eval batches, %.0f s)" % (
        vl, iters, eval_iters, time.time() - t0))


if __name__ == "__main__":
    main()
