#!/usr/bin/env python3
"""torch_gpu_step.py: the PyTorch reference for `make bench-gpu`: median time of a GPT-2 training
step (forward, backward, fused AdamW) on one CUDA GPU, the way nanoGPT trains it: bf16 autocast,
fp32 master weights, TF32 matmuls, flash attention through scaled_dot_product_attention, vocab
padded to 50304, optionally torch.compile'd. Random tokens: speed does not depend on the data.

    python3 tests/bench/torch_gpu_step.py [--layers 12 --heads 12 --embd 768] [-B 16] [-T 1024]
                                          [--steps 30] [--compile]

Prints one line: config, ms/step (median), tokens/s, peak GiB, and the model FLOP utilisation
against --peak TFLOP/s (default 989, the H100 SXM's dense bf16 rate by its datasheet).
"""
import argparse
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, H, C, V, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # lm_head tied to wte
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("-B", type=int, default=16)
    ap.add_argument("-T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--peak", type=float, default=989.0)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(1337)
    dev = "cuda"
    model = GPT(a.layers, a.heads, a.embd, a.vocab, a.T).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn = torch.compile(model) if a.compile else model
    n_tokens = min(50257, a.vocab)  # GPT-2's vocab, or a small model's whole (padded) one
    x = torch.randint(0, n_tokens, (a.B, a.T), device=dev)
    y = torch.randint(0, n_tokens, (a.B, a.T), device=dev)
    times = []
    for s in range(a.steps + 5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
        if s >= 5:  # warm-up: allocator, cuBLAS handles, compilation
            times.append(start.elapsed_time(end))
    assert math.isfinite(loss.item())
    ms = statistics.median(times)
    tokens = a.B * a.T
    n_flop_params = n_params - a.T * a.embd  # nanoGPT's count: position embeddings do no matmul
    flops = tokens * (6 * n_flop_params + 12 * a.layers * a.embd * a.T)
    print(f"torch{' compile' if a.compile else ''} L={a.layers} C={a.embd} B={a.B} T={a.T}: "
          f"{ms:.1f} ms/step, {tokens / ms * 1e3:,.0f} tokens/s, "
          f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB, "
          f"MFU {flops / (ms * 1e-3) / (a.peak * 1e12) * 100:.1f}%")


if __name__ == "__main__":
    main()
