#!/usr/bin/env python3
"""gguf_from_hf.py: a GPT-2 in HuggingFace form (gpt-ckpt export --hf DIR: config.json,
model.safetensors) and GPT-2's BPE files to a GGUF file for llama.cpp, the reference of the
sampling benchmark (tests/bench/llamacpp.sh). Writes what llama.cpp's convert_hf_to_gguf.py
writes for GPT2LMHeadModel (its conversion/gpt2.py: Conv1D weights transposed to (out, in),
tensor names from gguf-py's GPT2 map, the gpt2 tokenizer with the "gpt-2" pre-tokenizer), without
its torch and transformers: 2-D weights in TYPE (f32, f16, bf16 or q8_0, quantized by gguf-py), 1-D
tensors and the position embeddings in f32, lm_head tied to token_embd.

Usage: gguf_from_hf.py HF_DIR ENCODER_JSON VOCAB_BPE TYPE OUT.gguf
gguf-py: llama.cpp's own (PYTHONPATH=.../gguf-py) or PyPI's gguf; numpy."""
import json
import struct
import sys

import numpy as np
import gguf


def read_safetensors(path):
    """name -> float32 array of a safetensors file of F32 tensors."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, t in header.items():
            if name == "__metadata__":
                continue
            if t["dtype"] != "F32":
                sys.exit(f"{path}: {name} is {t['dtype']}, not F32")
            a, b = t["data_offsets"]
            f.seek(base + a)
            out[name] = np.frombuffer(f.read(b - a), dtype=np.float32).reshape(t["shape"])
    return out


def tensor_name(hf):
    """gguf's name of a HuggingFace GPT-2 tensor, None for those llama.cpp does not keep."""
    top = {"transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
           "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"}
    if hf in top:
        return top[hf]
    parts = hf.split(".")  # transformer.h.N.<module...>.<weight|bias>
    if parts[:2] != ["transformer", "h"]:
        return None
    block = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
             "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}.get(".".join(parts[3:-1]))
    return f"blk.{parts[2]}.{block}.{parts[-1]}" if block else None


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.split("\n\n")[1])
    hf_dir, encoder_json, vocab_bpe, kind, out = sys.argv[1:]
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16, "bf16": gguf.GGMLQuantizationType.BF16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0}[kind]
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[kind]
    cfg = json.load(open(f"{hf_dir}/config.json"))
    tensors = read_safetensors(f"{hf_dir}/model.safetensors")
    encoder = json.load(open(encoder_json, encoding="utf-8"))
    merges = [line for line in open(vocab_bpe, encoding="utf-8").read().split("\n")[1:] if line]
    tokens = [t for t, _ in sorted(encoder.items(), key=lambda kv: kv[1])]
    if len(tokens) != cfg["vocab_size"]:
        sys.exit(f"{encoder_json}: {len(tokens)} tokens, the model has {cfg['vocab_size']}")

    w = gguf.GGUFWriter(out, "gpt2")
    w.add_name("gptkit-bench")
    w.add_block_count(cfg["n_layer"])
    w.add_context_length(cfg["n_ctx"])
    w.add_embedding_length(cfg["n_embd"])
    w.add_feed_forward_length(4 * cfg["n_embd"])
    w.add_head_count(cfg["n_head"])
    w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    w.add_file_type(ftype)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL
                       for t in tokens])
    w.add_token_merges(merges)
    eot = encoder["<|endoftext|>"]
    w.add_bos_token_id(eot)
    w.add_eos_token_id(eot)
    w.add_add_bos_token(False)
    for hf, a in tensors.items():
        name = tensor_name(hf)
        if name is None:
            continue
        if hf.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
            a = np.ascontiguousarray(a.T)  # Conv1D (in, out) -> (out, in)
        if a.ndim == 2 and name != "position_embd.weight" and kind != "f32":
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
