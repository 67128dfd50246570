#!/usr/bin/env python3
"""hf_decode.py: HuggingFace transformers' generate for one stream, the reference beside
gpt-sample's decoding in `make bench-gpu` (BENCH_PARTS=decode; issue 43's "beside transformers'
generate with static cache and torch.compile"): GPT2LMHeadModel of the given shape with random
weights, bf16 on one CUDA GPU, batch 1, greedy, a prompt of P random tokens, N new tokens (no
end-of-text stop), in the modes named:
  compiled  the static cache and the forward compiled with torch.compile (mode reduce-overhead:
            CUDA graphs), as transformers' "LLM inference optimization" guide does it
  eager     the default dynamic cache, no compile
Each mode runs generate twice to warm up (the compile happens there), then times a third run
(prefill included: one forward of P tokens).

    python3 tests/bench/hf_decode.py L H C T V P N [compiled eager]

Prints one line a mode: "hf-generate MODE: N tokens in S s (R tokens/s)", or "hf-generate MODE:
failed: REASON" (the bench goes on).
"""
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def build(L, H, C, T, V):
    cfg = GPT2Config(n_layer=L, n_head=H, n_embd=C, n_positions=T, vocab_size=V,
                     bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = GPT2LMHeadModel(cfg)
    return model.to(torch.bfloat16).eval()


def run(model, mode, prompt, n):
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    if mode == "compiled":
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    elif mode != "eager":
        raise ValueError(f"unknown mode {mode}")
    with torch.inference_mode():
        for _ in range(2):
            model.generate(prompt, **kw)
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model.generate(prompt, **kw)
        torch.cuda.synchronize()
        t = time.perf_counter() - t
    new = out.shape[1] - prompt.shape[1]
    return new, t


def main():
    L, H, C, T, V, P, N = (int(a) for a in sys.argv[1:8])
    modes = sys.argv[8:] or ["compiled", "eager"]
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, V, (1, P), generator=g).to("cuda")
    for mode in modes:
        try:
            new, t = run(build(L, H, C, T, V), mode, prompt, N)
            print(f"hf-generate {mode}: {new} tokens in {t:.3f} s ({new / t:.1f} tokens/s)",
                  flush=True)
        except Exception as e:  # a mode that fails is a note in the bench, not its end
            print(f"hf-generate {mode}: failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}",
                  flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
