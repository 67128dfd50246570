#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/choice: HellaSwag-format items (tests/fixtures/hellaswag,
# one a file and all together), a label given as a string, blank lines, a long ctx.
# Usage: tests/fuzz/seed_choice.sh
set -euo pipefail
source "$(dirname "$0")/seed_lib.bash"
seed_begin choice
rm -rf "$out" && mkdir -p "$out"
items=$top/tests/fixtures/hellaswag/items.jsonl
cp "$items" "$out/all.jsonl"
n=0
while IFS= read -r line; do n=$((n + 1)); printf '%s\n' "$line" > "$out/item$n.jsonl"; done < "$items"
printf '\n{"ctx": "Yes or", "endings": ["no.", "maybe.", "so"], "label": "2"}\n\n' > "$out/blank_lines.jsonl"
printf '{"ctx": "%s", "endings": ["a", "b"], "label": 1}\n' "$(printf 'long context %.0s' {1..20})" > "$out/long_ctx.jsonl"
