#!/usr/bin/python3
"""gpt2_tiny_ref.py: PyTorch reference for kernels/model/ (nanoGPT's model, HuggingFace layout).

Run with Debian's torch (apt-get install -y python3-torch), i.e. with /usr/bin/python3
(the `python3` first on PATH may be a pyenv build without torch):

    /usr/bin/python3 tests/ref/gpt2_tiny_ref.py            # writes tests/fixtures/gpt2_tiny*.bin

Fixtures (read by tests/unit/test_gpt2.c). All little-endian; f32 = float32, i32 = int32:

    i32[16] header: magic 0x46324B47 ("GK2F"), version 1, n_layer, n_head, n_embd, block_size,
                    vocab_size, bias (0/1), B, T, n_steps, n_final (values kept per tensor), 0...
    f32[8]  hyper:  lr, weight_decay, grad_clip, beta1, beta2, eps, 0, 0
    f32     params, every tensor of the table in order (HF names, logical shapes: wte [V,C])
    i32     inputs[B*T], targets[B*T]  (targets may hold -1 = ignored)
    f32     logits[B*T*V], loss
    f32     grads, in table order, same sizes as params
    f32     losses[n_steps], grad_norms[n_steps] (before clipping) of n_steps AdamW steps on the
            same batch: zero_grad, forward, backward, clip_grad_norm_, step
    f32     per tensor: its first n_final values after the n_steps, then the L2 norm of the
            whole tensor (the full final parameters would double the file size)

The table order: transformer.wte.weight, transformer.wpe.weight, then per layer i
transformer.h.i.{ln_1.weight, ln_1.bias, attn.c_attn.weight, attn.c_attn.bias,
attn.c_proj.weight, attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight, mlp.c_fc.bias,
mlp.c_proj.weight, mlp.c_proj.bias}, transformer.ln_f.weight, transformer.ln_f.bias; with bias off
every *.bias is absent.
"""
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Conv1D(nn.Module):
    """HuggingFace's Conv1D: weight stored [in, out], y = x @ W + b."""

    def __init__(self, nin, nout, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nin, nout).normal_(0.0, 0.02))
        self.bias = nn.Parameter(torch.zeros(nout)) if bias else None

    def forward(self, x):
        y = x @ self.weight
        return y + self.bias if self.bias is not None else y


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_attn = Conv1D(cfg["n_embd"], 3 * cfg["n_embd"], cfg["bias"])
        self.c_proj = Conv1D(cfg["n_embd"], cfg["n_embd"], cfg["bias"])
        self.n_head = cfg["n_head"]

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg["n_embd"], 4 * cfg["n_embd"], cfg["bias"])
        self.c_proj = Conv1D(4 * cfg["n_embd"], cfg["n_embd"], cfg["bias"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg["vocab_size"], C),
            wpe=nn.Embedding(cfg["block_size"], C),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])]),
            ln_f=LayerNorm(C, cfg["bias"]),
        ))
        for n, p in self.named_parameters():  # nanoGPT's init
            if n.endswith(".weight") and p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg["n_layer"]) if n.endswith("c_proj.weight") else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.size(1)))
        for block in tr.h:
            x = block(x)
        logits = tr.ln_f(x) @ tr.wte.weight.t()
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def f32(a):
    return a.detach().contiguous().view(-1).to(torch.float32).numpy().astype("<f4").tobytes()


def make(path, cfg, B, T, steps=10, lr=1e-3, wd=0.1, clip=1.0, betas=(0.9, 0.95), eps=1e-8,
         n_final=64):
    torch.manual_seed(1337)
    model = GPT(cfg)
    params = list(model.named_parameters())
    tok = torch.randint(0, cfg["vocab_size"], (B, T + 1))
    x, y = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
    y[1, 3] = -1  # exercise ignore_index
    out = bytearray()
    hdr = [0x46324B47, 1, cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["block_size"],
           cfg["vocab_size"], int(cfg["bias"]), B, T, steps, n_final]
    out += struct.pack("<16i", *(hdr + [0] * (16 - len(hdr))))
    out += struct.pack("<8f", lr, wd, clip, betas[0], betas[1], eps, 0, 0)
    for _, p in params:
        out += f32(p)
    out += x.numpy().astype("<i4").tobytes() + y.numpy().astype("<i4").tobytes()
    logits, loss = model(x, y)
    loss.backward()
    out += f32(logits) + struct.pack("<f", loss.item())
    for _, p in params:
        out += f32(p.grad)
    # nanoGPT's configure_optimizers: decay 2-D tensors only
    groups = [{"params": [p for _, p in params if p.dim() >= 2], "weight_decay": wd},
              {"params": [p for _, p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    losses, norms = [], []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), clip).item())
        opt.step()
        losses.append(loss.item())
    out += struct.pack("<%df" % steps, *losses) + struct.pack("<%df" % steps, *norms)
    for _, p in params:
        out += f32(p.view(-1)[:n_final]) + struct.pack("<f", p.norm().item())
    with open(path, "wb") as f:
        f.write(out)
    print("%s: %d bytes, loss %.6f, losses %s, grad norms %s" % (
        path, len(out), losses[0], " ".join("%.4f" % l for l in losses),
        " ".join("%.3f" % n for n in norms)))


def main():
    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    fix = os.path.join(here, "..", "fixtures")
    base = dict(n_layer=2, n_head=4, n_embd=64, block_size=16, vocab_size=100, bias=True)
    make(os.path.join(fix, "gpt2_tiny.bin"), base, B=2, T=16)
    nob = dict(base, n_layer=1, bias=False)
    make(os.path.join(fix, "gpt2_tiny_nobias.bin"), nob, B=2, T=16)


if __name__ == "__main__":
    sys.exit(main())
