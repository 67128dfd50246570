#!/usr/bin/env python3
"""Writes the Parquet fixtures of tests/unit/test_parquet.c with pyarrow (pip install pyarrow):
tests/fixtures/parquet/*.parquet and expected.json, which holds for each file what pyarrow reads
from it (the column the reader should choose, its non-null rows in order or "rows_of" another
file that has the same, the null count, the file's row count) or, for a file the reader must
refuse, a piece of the error message.
Files: every codec (none, snappy, gzip, zstd, lz4 = LZ4_RAW, brotli: refused) with data pages v1
and dictionary encoding, and v2 with PLAIN; DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY; nulls
over several row groups and pages; a dictionary that falls back to PLAIN; a struct leaf and a
list column; a file of numbers; several string columns; page checksums; and damaged files (a
page length past its chunk, a dictionary index out of range, a page that fails its checksum).
Usage: python3 tests/ref/parquet_fixtures.py [OUTDIR]"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../fixtures/parquet")
os.makedirs(out, exist_ok=True)
expected = {}

WORDS = ["the", "quick", "brown", "fox", "jumps", "über", "naïve café", "日本語のテキスト", "", "a\u0000b",
         "emoji 🙂 ok", "line\nbreak", "tab\there", "x" * 70]


def texts(n, seed):
    return [" ".join(WORDS[(seed + i * 7 + k * 3) % len(WORDS)] for k in range(1 + (i + seed) % 4))
            for i in range(n)]


def record(name, column=None, error=None):
    """What pyarrow reads from NAME: the rows of COLUMN (None: the reader must fail with ERROR)."""
    path = os.path.join(out, name)
    entry = {"rows_in_file": pq.ParquetFile(path).metadata.num_rows}
    if error is not None:
        entry["error"] = error
    else:
        col = pq.read_table(path, columns=[column]).column(0).to_pylist() if "." not in column else \
            leaf(pq.read_table(path), column)
        entry["column"] = column
        entry["rows"] = [v for v in col if v is not None]
        entry["nulls"] = sum(v is None for v in col)
    expected[name] = entry


def leaf(table, dotted):
    top, rest = dotted.split(".", 1)
    vals = table.column(top).to_pylist()
    for key in rest.split("."):
        vals = [None if v is None else v.get(key) for v in vals]
    return vals


def write(name, table, **kw):
    kw.setdefault("row_group_size", 25)
    kw.setdefault("data_page_size", 512)
    pq.write_table(table, os.path.join(out, name), **kw)


# ---- every codec, page v1 + dictionary and page v2 + plain ----
for codec in ["none", "snappy", "gzip", "zstd", "lz4"]:
    t = pa.table({"id": pa.array(range(60), pa.int64()), "text": texts(60, len(codec))})
    write(f"{codec}_v1_dict.parquet", t, compression=codec, use_dictionary=True, data_page_version="1.0")
    record(f"{codec}_v1_dict.parquet", "text")
    write(f"{codec}_v2_plain.parquet", t, compression=codec, use_dictionary=False, data_page_version="2.0")
    record(f"{codec}_v2_plain.parquet", "text")
write("brotli.parquet", pa.table({"text": texts(5, 1)}), compression="brotli")
record("brotli.parquet", error="BROTLI")

# ---- nulls across row groups and pages, both page versions; a dictionary falling back to PLAIN ----
vals = [None if i % 5 == 0 or 40 <= i < 52 else s for i, s in enumerate(texts(100, 3))]
for v in ["1.0", "2.0"]:
    name = f"nulls_v{v[0]}.parquet"
    write(name, pa.table({"text": vals}), compression="snappy", data_page_version=v, data_page_size=200)
    record(name, "text")
# DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY (shared prefixes: sorted URLs), with nulls, both page versions
urls = [None if i % 7 == 3 else f"https://example.org/{'abc'[i % 3]}/{i // 10}/page-{i}.html" + "é" * (i % 4)
        for i in range(160)]
for enc, short in [("DELTA_LENGTH_BYTE_ARRAY", "dlba"), ("DELTA_BYTE_ARRAY", "dba")]:
    for v in ["1.0", "2.0"]:
        name = f"{short}_v{v[0]}.parquet"
        write(name, pa.table({"text": urls}), compression="zstd" if v == "2.0" else "none", use_dictionary=False,
              column_encoding={"text": enc}, data_page_version=v, row_group_size=64, data_page_size=512)
        record(name, "text")
write("all_null.parquet", pa.table({"text": pa.array([None] * 7, pa.string())}))
record("all_null.parquet", "text")
write("dict_fallback.parquet", pa.table({"text": [f"doc {i} " + "y" * (i % 13) for i in range(90)]}),
      row_group_size=90, dictionary_pagesize_limit=300, compression="zstd")
record("dict_fallback.parquet", "text")
write("empty.parquet", pa.table({"text": pa.array([], pa.string())}))
record("empty.parquet", "text")

# ---- column choice: nested, numbers, several strings, one other string, binary ----
meta = pa.array([None if i == 3 else {"text": None if i == 5 else f"inner {i}", "n": i} for i in range(12)],
                pa.struct([("text", pa.string()), ("n", pa.int32())]))
tags = pa.array([[f"t{i}", "u"] for i in range(12)], pa.list_(pa.string()))
write("nested.parquet", pa.table({"meta": meta, "tags": tags, "score": pa.array(range(12), pa.float64())}))
record("nested.parquet", "meta.text")
write("numbers.parquet", pa.table({"n": pa.array(range(10), pa.int64()), "x": pa.array([0.5] * 10)}))
record("numbers.parquet", error="no string column")
write("two_strings.parquet", pa.table({"title": texts(8, 2), "body": texts(8, 5), "n": list(range(8))}))
record("two_strings.parquet", error="2 string columns")
write("content.parquet", pa.table({"n": list(range(9)), "content": texts(9, 4)}))
record("content.parquet", "content")
write("ambiguous.parquet", pa.table({"a.b": ["x", "y"], "a": pa.array([{"b": "z"}, {"b": "w"}]), "text": ["t", "u"]}))
record("ambiguous.parquet", "text")
write("text_int.parquet", pa.table({"text": pa.array(range(4), pa.int32()), "s": ["a", "b", "c", "d"]}))
record("text_int.parquet", error="INT32")


# ---- damaged files: bytes patched at places pyarrow's metadata gives ----
def varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        v |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if not b & 0x80:
            return v, pos


def page_header_fields(buf, pos):
    """(type, uncompressed, compressed, position after them) of the page header at pos: three i32
    fields (compact protocol, field deltas of 1, zigzag varints)."""
    fields = []
    for _ in range(3):
        assert buf[pos] == 0x15, "not a page header"
        start = pos + 1
        v, pos = varint(buf, start)
        fields.append((v >> 1 ^ -(v & 1), start, pos))
    return fields, pos


# A page whose compressed length runs past its column chunk: the only data page of the only chunk.
t = pa.table({"text": pa.array(texts(30, 7), pa.string()).cast(pa.string())})
write("bad_pagelen.parquet", t, compression="none", use_dictionary=False, row_group_size=100,
      data_page_size=1 << 20)
path = os.path.join(out, "bad_pagelen.parquet")
buf = bytearray(open(path, "rb").read())
cc = pq.ParquetFile(path).metadata.row_group(0).column(0)
fields, _ = page_header_fields(buf, cc.data_page_offset)
_, start, end = fields[2]
assert end - start == 2, "expected a two-byte compressed_page_size"
buf[start:end] = b"\xfe\x7f"  # 8191
open(path, "wb").write(buf)
record("bad_pagelen.parquet", error="runs past")

# A dictionary index out of range: the dictionary page says it holds 1 value, the pages use 2.
t = pa.table({"text": pa.array(["a", "b"] * 8, pa.string())},
             schema=pa.schema([pa.field("text", pa.string(), nullable=False)]))
write("bad_dict_index.parquet", t, compression="none", use_dictionary=True, row_group_size=100)
path = os.path.join(out, "bad_dict_index.parquet")
buf = bytearray(open(path, "rb").read())
cc = pq.ParquetFile(path).metadata.row_group(0).column(0)
fields, pos = page_header_fields(buf, cc.dictionary_page_offset)
assert fields[0][0] == 2, "expected a dictionary page"
assert buf[pos] == 0x4C and buf[pos + 1] == 0x15 and buf[pos + 2] == 4, "expected num_values 2"
buf[pos + 2] = 2  # num_values 1
open(path, "wb").write(buf)
record("bad_dict_index.parquet", error="dictionary index 1")

# Files of the same rows (codecs, page versions) share them: "rows_of" names the entry holding them.
first = {}
for name in sorted(expected):
    entry = expected[name]
    if "rows" in entry:
        key = json.dumps([entry["rows"], entry["nulls"]])
        if key in first:
            del entry["rows"]
            entry["rows_of"] = first[key]
        else:
            first[key] = name
# Page checksums (CRC-32 of each page's bytes on disk): read as they are, and with one value's byte
# flipped (a row neither the minimum nor the maximum, so not in the page statistics).
rows = ["alpha " + str(i) for i in range(10)] + ["middle-marker"] + ["zulu " + str(i) for i in range(10)]
write("crc.parquet", pa.table({"text": rows}), compression="none", use_dictionary=False, write_page_checksum=True)
record("crc.parquet", "text")
path = os.path.join(out, "crc.parquet")
buf = bytearray(open(path, "rb").read())
at = buf.index(b"middle-marker")
assert buf.find(b"middle-marker", at + 1) < 0
buf[at] ^= 0x20
open(os.path.join(out, "bad_crc.parquet"), "wb").write(buf)
record("bad_crc.parquet", error="fails its checksum")

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, ensure_ascii=False, indent=0, sort_keys=True)
    f.write("\n")
total = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
print(f"{len(expected)} files, {total} bytes in {out}")
