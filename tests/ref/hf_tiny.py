#!/usr/bin/python3
"""hf_tiny.py: a tiny random HuggingFace GPT2LMHeadModel and its outputs, for gpt-ckpt import/export
and gpt-evalppl tests.

Needs torch (Debian's python3-torch) and transformers < 4.36 with safetensors, e.g.

    /usr/bin/python3 -m pip install --break-system-packages 'transformers<4.36' safetensors
    /usr/bin/python3 tests/ref/hf_tiny.py [GPT2_VOCAB_DIR]   # default ../shared/data/gpt2

Writes tests/fixtures/hf_tiny/ (the script is deterministic; the files are committed):

    config.json, model.safetensors      GPT2LMHeadModel.save_pretrained(safe_serialization=True):
                                        n_layer 2, n_head 2, n_embd 32, n_positions 32, vocab 301
    vocab.json, merges.txt              a tiny GPT-2 byte-level BPE: the 256 byte tokens (ids 0..255)
                                        and the first 44 merges of GPT-2's vocab.bpe (merge i makes
                                        id 256+i), then <|endoftext|> = 300
    generation_config.json              as save_pretrained writes it
    input.txt                           the text whose tokens are the input below
    logits.bin                          all little-endian:
        i32[8]  magic 0x54464847 ("GHFT"), version 1, T, V, 0, 0, 0, 0
        i32[T]  input ids (input.txt tokenized by GPT2Tokenizer with vocab.json + merges.txt)
        f32     loss: transformers' loss with labels = input ids (mean NLL of ids[1:] given
                the prefix, over T-1 predictions)
        f32[T*V] logits, row-major (T, V), model in eval mode (no dropout)

Every parameter (LayerNorm and biases included) is random, so a tensor mapped to the wrong place
or left out changes the logits.
"""
import json
import os
import struct
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

N_MERGES = 44
TEXT = ("Hello world, the quick brown fox jumps over the lazy dog. "
        "It is in the end and at the heart of it.")
T = 24


def tiny_vocab(src, out):
    with open(os.path.join(src, "encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    with open(os.path.join(src, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("#version")
    merges = lines[1:1 + N_MERGES]
    by_id = {i: t for t, i in enc.items()}
    vocab = {by_id[i]: i for i in range(256 + N_MERGES)}
    for i, m in enumerate(merges):  # merge i makes token 256 + i in GPT-2's vocabulary
        a, b = m.split(" ")
        assert vocab[a + b] == 256 + i, m
    vocab["<|endoftext|>"] = len(vocab)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return len(vocab)


def main():
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, "..", "shared", "data", "gpt2")
    out = os.path.join(top, "tests", "fixtures", "hf_tiny")
    os.makedirs(out, exist_ok=True)
    V = tiny_vocab(src, out)

    torch.manual_seed(1234)
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=32, n_ctx=32, vocab_size=V,
                     bos_token_id=V - 1, eos_token_id=V - 1)
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)

    tok = GPT2Tokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
    ids = tok.encode(TEXT)[:T]
    assert len(ids) == T, len(ids)
    with open(os.path.join(out, "input.txt"), "w", encoding="utf-8") as f:
        f.write(tok.decode(ids))
    x = torch.tensor([ids])
    with torch.no_grad():
        res = model(x, labels=x)
    logits = res.logits[0].float().contiguous()
    with open(os.path.join(out, "logits.bin"), "wb") as f:
        f.write(struct.pack("<8i", 0x54464847, 1, T, V, 0, 0, 0, 0))
        f.write(struct.pack("<%di" % T, *ids))
        f.write(struct.pack("<f", res.loss.item()))
        f.write(logits.numpy().astype("<f4").tobytes())
    for n in os.listdir(out):
        os.chmod(os.path.join(out, n), 0o644)
    total = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    print("wrote %s: vocab %d, loss %.6f, %d bytes" % (out, V, res.loss.item(), total))


if __name__ == "__main__":
    main()
