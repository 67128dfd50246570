#!/usr/bin/env python3
"""Reference side of make bench's Parquet row, and the maker of its input.

    parquet_tiktoken.py make TEXT OUT.parquet MB    a FineWeb-shaped file: TEXT cut into documents
                                                    of 500 B to 8 kB (seeded), repeated up to MB
                                                    megabytes, a "text" column beside "id" and
                                                    "url", zstd, row groups of 1000 documents
    parquet_tiktoken.py run VOCAB_DIR IN.parquet OUT.bin WORKERS
        the way llm.c's fineweb.py and nanochat prepare data: pyarrow reads the file row group by
        row group, a multiprocessing pool of WORKERS processes runs tiktoken's encode_ordinary on
        each document (<|endoftext|> first), the parent writes the tokens as uint16 to OUT.bin
        (no header). Prints "seconds tokens peak_rss_mb" (the parent's peak RSS plus WORKERS times
        the largest worker's: the memory the whole run held at most)."""
import array
import multiprocessing as mp
import random
import resource
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
enc = None


def init(vocab):
    global enc
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    ranks = data_gym_to_mergeable_bpe_ranks(f"{vocab}/vocab.bpe", f"{vocab}/encoder.json")
    enc = tiktoken.Encoding("gpt2-local", pat_str=PAT, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})


def tokenize(doc):
    return array.array("H", [50256] + enc.encode_ordinary(doc)).tobytes()


def make(text_path, out, mb):
    text = open(text_path, "rb").read().decode("utf-8", errors="replace")
    r = random.Random(1)
    docs, at, total = [], 0, 0
    while total < mb * 1_000_000:
        n = r.randrange(500, 8000)
        if at + n > len(text):
            at = 0
        docs.append(text[at:at + n])
        at += n
        total += len(docs[-1].encode())
    table = pa.table({"id": [f"<urn:uuid:{i}>" for i in range(len(docs))],
                      "text": docs, "url": [f"https://example.com/{i}" for i in range(len(docs))]})
    pq.write_table(table, out, compression="zstd", row_group_size=1000)
    print(len(docs), total)


def run(vocab, path, out, workers):
    t0 = time.perf_counter()
    f = pq.ParquetFile(path)
    n = 0
    with open(out, "wb") as o, mp.Pool(workers, initializer=init, initargs=(vocab,)) as pool:
        for g in range(f.num_row_groups):
            docs = f.read_row_group(g, columns=["text"]).column("text").to_pylist()
            for b in pool.imap(tokenize, docs, chunksize=16):
                o.write(b)
                n += len(b) // 2
    dt = time.perf_counter() - t0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + \
        workers * resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"{dt:.3f} {n} {kb / 1024:.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
