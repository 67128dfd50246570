#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/parquet from the reader's fixtures (tests/fixtures/parquet, made by
# pyarrow through tests/ref/parquet_fixtures.py): each codec, pages v1 and v2, DELTA_*, nulls, a
# dictionary falling back to PLAIN, a nested file, and the two damaged ones.
# Usage: tests/fuzz/seed_parquet.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/tests/fuzz/corpus/parquet
rm -rf "$out" && mkdir -p "$out"
for f in none_v1_dict snappy_v2_plain gzip_v1_dict zstd_v2_plain lz4_v1_dict nulls_v1 nulls_v2 \
         dict_fallback nested empty bad_pagelen bad_dict_index dba_v2 dlba_v1; do
  cp "$top/tests/fixtures/parquet/$f.parquet" "$out/"
done
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
