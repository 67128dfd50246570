#!/usr/bin/env python3
"""tokenize_rows.py: documents as JSON Lines and Parquet rows, with tiktoken's ids for them, for
gpt-tokenize's row inputs (tests/cli/tokenize_jsonl.sh, tokenize_parquet.sh). Writes into
tests/fixtures/tokenize/:
  docs.jsonl         one object a line: "text" plus other fields; escapes (\\n, \\u00e9, a
                     surrogate pair), a CRLF line end, a blank line, "<|endoftext|>" as text
  nested.jsonl.gz    the same texts at "meta.body" (gzip; --field meta.body)
  docs.parquet       the same texts in a "text" column (optional: one null row, skipped), beside
                     an "id" column, zstd, row groups of 3 rows (pyarrow)
  docs.ids           tiktoken's ids: <|endoftext|> (50256) then encode_ordinary(text), for each
                     document in order, on one line, space-separated (tests/cli/lib.bash's ids)
Run: python3 tests/ref/tokenize_rows.py [GPT2_DIR]  (needs tiktoken and pyarrow; GPT2_DIR holds
encoder.json and vocab.bpe, default ../shared/data/gpt2)."""
import gzip
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import tiktoken
import tiktoken.load

PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TEXTS = [
    "Hello world",
    "Line one\nline two\twith a tab, and \"quotes\" and \\ backslash.",
    "caf\u00e9 na\u00efve \u4e2d\u6587 \U0001f600 emoji",
    "   leading spaces and trailing   ",
    "",
    "It's what they're doing: we've 12345 numbers, don't we?",
    "text with <|endoftext|> inside, as ordinary text",
    "The quick brown fox jumps over the lazy dog. " * 20,
]


def main():
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, "..", "shared", "data", "gpt2")
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(os.path.join(d, "vocab.bpe"),
                                                          os.path.join(d, "encoder.json"))
    enc = tiktoken.Encoding("gpt2", pat_str=PAT, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    out = os.path.join(top, "tests", "fixtures", "tokenize")
    os.makedirs(out, exist_ok=True)
    lines = []
    for i, t in enumerate(TEXTS):
        lines.append(json.dumps({"id": i, "text": t, "score": 0.5}) + ("\r\n" if i == 2 else "\n"))
        if i == 3:
            lines.append("\n")  # a blank line: no document
    with open(os.path.join(out, "docs.jsonl"), "w", newline="") as f:
        f.write("".join(lines))
    with gzip.GzipFile(os.path.join(out, "nested.jsonl.gz"), "wb", mtime=0) as f:
        for i, t in enumerate(TEXTS):
            f.write((json.dumps({"meta": {"body": t, "lang": "en"}, "text": i}) + "\n").encode())
    col = TEXTS[:4] + [None] + TEXTS[4:]
    table = pa.table({"id": pa.array(range(len(col)), pa.int64()), "text": pa.array(col, pa.string())})
    pq.write_table(table, os.path.join(out, "docs.parquet"), compression="zstd", row_group_size=3)
    ids = []
    for t in TEXTS:
        ids += [50256] + enc.encode_ordinary(t)
    with open(os.path.join(out, "docs.ids"), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
