#!/usr/bin/env python3
"""ckpt_export_expect.py: what gpt-ckpt export --hf wrote, as data that can be compared with the
committed expectations in tests/fixtures/hf_export.json (made by tests/ref/hf_export.py, which
loaded such exports in transformers and checked their logits). Python standard library only.

    ckpt_export_expect.py DIR CASE...                    prints {CASE: description} as JSON
    ckpt_export_expect.py --compare FIXTURE DIR CASE...  compares DIR/CASE.hf with FIXTURE

A description of DIR/CASE.hf: its file names; config.json as parsed; the sha256 of every other
file but model.safetensors; model.safetensors' metadata and, per tensor, "DTYPE [SHAPE] HASH" (HASH: the
first 16 hex digits of the sha256 of its bytes). Equal descriptions mean the same model, config and
tokenizer files as the ones transformers was checked on. --compare prints one line per case,
or one line per difference, and exits 1 if any.
"""
import hashlib
import json
import os
import struct
import sys


def describe(hfdir):
    files = sorted(os.listdir(hfdir))
    with open(os.path.join(hfdir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    sha = {}
    for name in files:
        if name not in ("config.json", "model.safetensors"):
            with open(os.path.join(hfdir, name), "rb") as f:
                sha[name] = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(hfdir, "model.safetensors"), "rb") as f:
        raw = f.read()
    n = struct.unpack_from("<Q", raw, 0)[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    meta = header.pop("__metadata__", {})
    meta.pop("gptkit.checksums", None)  # gptkit's own per-tensor CRCs; transformers ignores them
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        tensors[name] = "%s %s %s" % (t["dtype"], json.dumps(t["shape"]),
                                      hashlib.sha256(data[b:e]).hexdigest()[:16])
    return {"files": files, "config": config, "sha256": sha, "metadata": meta, "tensors": tensors}


def differences(case, got, want):
    out = []
    if got["files"] != want["files"]:
        out.append("files %s, expected %s" % (got["files"], want["files"]))
    for key in sorted(set(got["config"]) | set(want["config"])):
        g, w = got["config"].get(key, "(absent)"), want["config"].get(key, "(absent)")
        if g != w:
            out.append("config.json %s: %s, expected %s" % (key, json.dumps(g), json.dumps(w)))
    for name in sorted(set(got["sha256"]) | set(want["sha256"])):
        if got["sha256"].get(name) != want["sha256"].get(name):
            out.append("%s differs" % name)
    if got["metadata"] != want["metadata"]:
        out.append("model.safetensors metadata %s, expected %s" % (got["metadata"], want["metadata"]))
    for name in sorted(set(got["tensors"]) | set(want["tensors"])):
        g, w = got["tensors"].get(name), want["tensors"].get(name)
        if g is None or w is None:
            out.append("tensor %s %s" % (name, "missing" if g is None else "unexpected"))
        elif g.rsplit(" ", 1)[0] != w.rsplit(" ", 1)[0]:
            out.append("tensor %s: %s, expected %s" % (name, g.rsplit(" ", 1)[0], w.rsplit(" ", 1)[0]))
        elif g != w:
            out.append("tensor %s: other values" % name)
    return ["%s: %s" % (case, d) for d in out]


def main():
    args = sys.argv[1:]
    fixture = None
    if args[:1] == ["--compare"]:
        with open(args[1], encoding="utf-8") as f:
            fixture = json.load(f)["cases"]
        args = args[2:]
    d, cases = args[0], args[1:]
    got = {c: describe(os.path.join(d, c + ".hf")) for c in cases}
    if fixture is None:
        json.dump(got, sys.stdout, indent=1, sort_keys=True)
        print()
        return 0
    bad = 0
    for c in cases:
        diff = differences(c, got[c], fixture[c]["export"]) if c in fixture else [c + ": no expectation"]
        for line in diff:
            print(line)
        if not diff:
            print("%s: as checked with transformers (%d tensors, %d files)"
                  % (c, len(got[c]["tensors"]), len(got[c]["files"])))
        bad += len(diff) > 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
