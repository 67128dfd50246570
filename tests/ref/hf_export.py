#!/usr/bin/env python3
"""hf_export.py: checks gpt-ckpt export --hf with transformers and writes what it checked as the
expectations the CI test compares with (tests/fixtures/hf_export.json), so that CI, which has no
torch, still proves each export right.

Needs torch and transformers (pip install torch transformers; or Debian's python3-torch with
pip install 'transformers<4.36') and the built tools:

    python3 tests/ref/hf_export.py [--build BUILD] [--check]

--build BUILD: use BUILD/bin's tools (default: those on PATH, else build/bin). --check: compare
with the committed expectations instead of writing them (tests/cli/ckpt_export_hf.sh runs this).

For each case of tests/cli/ckpt_export_cases.bash (the tiny HuggingFace fixture imported: with
biases, without them (bias = false, exported with zero biases), and as bfloat16):
  1. GPT2LMHeadModel.from_pretrained(export) in float32 gives, on the fixture's 24 input ids, the
     logits of an independent reference within 1e-6 (relative to the largest): the fixture's own
     transformers model (tests/fixtures/hf_tiny, logits.bin); that model with every bias set to
     zero; that model with every parameter rounded to bfloat16. lm_head is tied to wte.
  2. gptkit (gpt-evalppl on the checkpoint that was exported) gives transformers' loss within
     1e-5 relative.
  3. GPT2Tokenizer on the export, and PreTrainedTokenizerFast on its tokenizer.json, encode the
     fixture's text to the fixture's ids.
Then each export's description (tests/cli/ckpt_export_expect.py: config.json, files, tensor
names, dtypes, shapes and hashes) and transformers' loss go to tests/fixtures/hf_export.json.
The CI test (tests/cli/ckpt_export_ref.sh) makes the same exports, requires the same
descriptions, and requires gptkit's loss to equal the recorded transformers loss.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import GPT2LMHeadModel, GPT2Tokenizer, PreTrainedTokenizerFast

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(TOP, "tests", "fixtures")
OUT = os.path.join(FIX, "hf_export.json")
sys.path.insert(0, os.path.join(TOP, "tests", "cli"))
import ckpt_export_expect  # noqa: E402


def fixture_logits():
    raw = open(os.path.join(FIX, "hf_tiny", "logits.bin"), "rb").read()
    _, _, T, V = struct.unpack_from("<4i", raw, 0)
    ids = list(struct.unpack_from("<%di" % T, raw, 32))
    want = np.frombuffer(raw, "<f4", T * V, 36 + 4 * T).reshape(T, V)
    return ids, want


def load(path):
    """The model at path in float32; every weight must come from the file (transformers would
    initialise a missing bias to zero and only warn)."""
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype": torch.float32} if major >= 5 else {"torch_dtype": torch.float32}
    m, info = GPT2LMHeadModel.from_pretrained(path, output_loading_info=True, **kw)
    missing = [k for k in info["missing_keys"] if k != "lm_head.weight"]
    assert not missing and not info["unexpected_keys"], (path, info)
    return m.eval()


def run(model, ids):
    with torch.no_grad():
        r = model(torch.tensor([ids]), labels=torch.tensor([ids]))
    return r.logits[0].numpy().astype(np.float64), float(r.loss.item())


def references(ids, fixture):
    """Logits each export must give, from the fixture's transformers model, not from gptkit."""
    refs = {}
    for case in ("bias", "nobias", "bf16"):
        m = load(os.path.join(FIX, "hf_tiny"))
        with torch.no_grad():
            for name, p in m.named_parameters():
                if case == "nobias" and name.endswith(".bias"):
                    p.zero_()
                if case == "bf16":
                    p.copy_(p.to(torch.bfloat16).to(torch.float32))
        refs[case] = run(m, ids)[0]
    assert np.abs(refs["bias"] - fixture).max() / np.abs(fixture).max() < 1e-6
    for case in ("nobias", "bf16"):  # each case tells its model apart
        assert np.abs(refs[case] - fixture).max() / np.abs(fixture).max() > 1e-4, case
    return refs


def gptkit_loss(ckpt, ids, tmp):
    raw = os.path.join(tmp, "ids.raw")
    with open(raw, "wb") as f:
        f.write(struct.pack("<%dH" % len(ids), *ids))
    out = subprocess.run(["gpt-evalppl", "-q", "--raw", "--json", "-m", ckpt, "--context",
                          str(len(ids)), raw], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["nll"]


def check_case(case, d, ids, ref, text):
    m = load(os.path.join(d, case + ".hf"))
    logits, loss = run(m, ids)
    err = float(np.abs(logits - ref).max() / np.abs(ref).max())
    ours = gptkit_loss(os.path.join(d, case + ".safetensors"), ids, d)
    tied = m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr()
    tok = GPT2Tokenizer.from_pretrained(os.path.join(d, case + ".hf"))
    fast = PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, case + ".hf", "tokenizer.json"))
    ok = [err < 1e-6, abs(ours - loss) < 1e-5 * loss, tied, tok.encode(text) == ids,
          fast.encode(text) == ids]
    print("%s: transformers' logits as the reference: %s, gptkit's loss as transformers': %s, "
          "tied lm_head: %s, tokenizer gives the ids: %s, tokenizer.json too: %s" % (case, *ok))
    if not all(ok):
        print("%s: logits error %g, loss %.7f (gptkit %.7f)" % (case, err, loss, ours))
    return all(ok), loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.build or not shutil.which("gpt-ckpt"):
        os.environ["PATH"] = os.path.join(os.path.abspath(a.build or "build"), "bin") + os.pathsep + os.environ["PATH"]
    os.environ["TOP"] = TOP
    ids, fixture = fixture_logits()
    text = open(os.path.join(FIX, "hf_tiny", "input.txt"), encoding="utf-8").read()
    refs = references(ids, fixture)
    with tempfile.TemporaryDirectory() as d:
        script = 'source "$TOP/tests/cli/ckpt_export_cases.bash"; export_cases "$1"; echo "${EXPORT_CASES[@]}"'
        cases = subprocess.run(["bash", "-c", script, "-", d], check=True, capture_output=True,
                               text=True).stdout.split()
        good, result = True, {}
        for case in cases:
            ok, loss = check_case(case, d, ids, refs[case], text)
            good &= ok
            result[case] = {"export": ckpt_export_expect.describe(os.path.join(d, case + ".hf")),
                            "transformers_loss": loss}
    if not good:
        print("an export does not load in transformers as it should: nothing written")
        return 1
    if a.check:
        with open(OUT, encoding="utf-8") as f:
            want = json.load(f)["cases"]
        diff = [x for c in cases for x in ckpt_export_expect.differences(c, result[c]["export"], want[c]["export"])]
        for line in diff:
            print(line)
        print("committed expectations up to date:", not diff)
        return 1 if diff else 0
    doc = {"made_by": "tests/ref/hf_export.py with torch %s, transformers %s"
                      % (torch.__version__.split("+")[0], transformers.__version__),
           "cases": result}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
