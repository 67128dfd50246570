#!/usr/bin/python3
"""hellaswag_tiny.py: what transformers makes of tests/fixtures/hellaswag/items.jsonl (HellaSwag's
JSON Lines format, items written for gptkit) with the tiny model of tests/fixtures/hf_tiny, scored
as llm.c's dev/data/hellaswag.py and build-nanogpt score HellaSwag, for gpt-evalppl --hellaswag.

Needs torch and transformers, as tests/ref/hf_tiny.py:

    /usr/bin/python3 tests/ref/hellaswag_tiny.py

Writes tests/fixtures/hellaswag/expect.json (deterministic; committed): per item its line, label,
pred, pred_norm, the summed NLL of each ending's tokens and their counts; then acc and acc_norm.

Scoring: row k = tokenizer(ctx) + tokenizer(" " + ending_k), no <|endoftext|>; the cross-entropy of
each ending token given everything before it, summed (acc: argmin) and averaged over the ending's
tokens (acc_norm: argmin). The model's context is 32 tokens: a row of more than 33 tokens keeps its
last 33 (gptkit's rule for rows longer than the context; item 4 needs it).
"""
import json
import os

import torch
import torch.nn.functional as F

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TINY = os.path.join(TOP, "tests", "fixtures", "hf_tiny")
DIR = os.path.join(TOP, "tests", "fixtures", "hellaswag")


def rows_of(encode, item, context=None):
    """(tokens, mask): the item's rows (ctx + " " + ending, each encoded apart) padded with 0 into
    (endings, width) tensors, mask 1 on the ending's tokens; rows cut to their last context + 1
    tokens when context is given. Also tests/bench/torch_hellaswag.py's."""
    ctx = encode(item["ctx"])
    rows, masks = [], []
    for ending in item["endings"]:
        end = encode(" " + ending)
        row, mask = ctx + end, [0] * len(ctx) + [1] * len(end)
        keep = len(row) if context is None else context + 1
        rows.append(row[-keep:])
        masks.append(mask[-keep:])
    width = max(len(r) for r in rows)
    tokens = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, m) in enumerate(zip(rows, masks)):
        tokens[i, :len(r)] = torch.tensor(r)
        mask[i, :len(m)] = torch.tensor(m)
    return tokens, mask


def score(model, tok, item, context):
    tokens, mask = rows_of(tok.encode, item, context)
    rows = tokens.size(0)
    with torch.no_grad():  # the last token of a row is never an input
        logits = model(tokens[:, :-1]).logits.double()
    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                             tokens[:, 1:].reshape(-1), reduction="none").view(rows, -1)
    scored = mask[:, 1:]
    sums = (losses * scored).sum(dim=1)
    counts = scored.sum(dim=1)
    return sums, counts


def main():
    from transformers import GPT2LMHeadModel, GPT2Tokenizer
    tok = GPT2Tokenizer(os.path.join(TINY, "vocab.json"), os.path.join(TINY, "merges.txt"))
    model = GPT2LMHeadModel.from_pretrained(TINY).eval()
    context = model.config.n_positions
    out, right, right_norm = [], 0, 0
    with open(os.path.join(DIR, "items.jsonl"), encoding="utf-8") as f:
        for line, text in enumerate(f, 1):
            item = json.loads(text)
            label = int(item["label"])
            sums, counts = score(model, tok, item, context)
            pred = int(sums.argmin())
            pred_norm = int((sums / counts).argmin())
            right += pred == label
            right_norm += pred_norm == label
            out.append({"line": line, "label": label, "pred": pred, "pred_norm": pred_norm,
                        "nll": [round(float(s), 6) for s in sums],
                        "tokens": [int(c) for c in counts]})
    res = {"items": out, "acc": right / len(out), "acc_norm": right_norm / len(out)}
    with open(os.path.join(DIR, "expect.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
