#!/usr/bin/env python3
"""hellaswag_items.py: N multiple-choice items of HellaSwag's shape for the benchmarks (make bench,
make bench-gpu), from a text: a 250-character context (~60 GPT-2 tokens) and 4 endings of 100
characters (~25 tokens), the right one (the text's own continuation) at position i mod 4.
Usage: hellaswag_items.py TEXT N > items.jsonl   (the text needs about 150 kB + 20 kB per item)
"""
import json
import sys


def main():
    text = open(sys.argv[1], encoding="utf-8").read().replace("\n", " ")
    n = int(sys.argv[2])
    for i in range(n):
        at = 1000 + (20011 * i) % max(1, len(text) - 13000)
        ends = [text[at + 250 + 3001 * k:at + 350 + 3001 * k] for k in range(4)]
        label = i % 4
        ends[0], ends[label] = ends[label], ends[0]
        print(json.dumps({"ctx": text[at:at + 250], "endings": ends, "label": label}))


if __name__ == "__main__":
    main()
