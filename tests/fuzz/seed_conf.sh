#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/conf (layout in fuzz_conf.c: MAIN \0 A \0 B \0 ARGS \0
# JSON): gpt-train --print-config's printout of presets (no '/' in it), include chains through
# a.conf, b.conf and a preset, overrides, two command lines, a checkpoint's JSON copy, quoting,
# and three mistakes (a cycle, a missing include, a key set twice).
# Usage: tests/fuzz/seed_conf.sh [BUILD]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:-$top/build}" && pwd)/bin
out=$top/tests/fuzz/corpus/conf
rm -rf "$out" && mkdir -p "$out"
seed() { # NAME MAIN A B ARGS JSON
  local name=$1; shift
  { printf '%s' "$1"; for p in "${@:2}"; do printf '\0%s' "$p"; done; } >"$out/$name"
}
printout() { # a preset's effective config, its '/' dropped (the target skips inputs with one)
  (cd "$top/train/configs" && "$bin/gpt-train" -c "$@" --print-config | tr -d /)
}
seed print_shakespeare_char "$(printout shakespeare_char.conf)" "" "" "" ""
seed print_gpt2_override "$(printout gpt2.conf --n_layer=2)" "" "" $'--n_layer=4\n--learning_rate=3e-4' ""
seed include_chain $'include = a.conf\nn_layer = 4  # small\n' \
  $'include = b.conf\nlearning_rate = 1e-3\n' $'include = gpt2\ndevice = cpu\nbias = yes\n' "" ""
seed quoted $'out_dir = "out dir #1"\nvocab = \'it\\\'s\'\ntrain_data = a.bin,b.bin\ndtype = bf16\n' \
  "" "" $'--dropout=0.1\n--seed=1K\n--total_batch_size=0.5Mi' ""
seed json "" "" "" "--init_from=resume" \
  '{"n_layer": 2, "n_head": 4, "n_embd": 128, "learning_rate": 0.001, "bias": true, "out_dir": "x", "max_iters": 1e3}'
seed command_lines "" $'n_layer = 3\n' "" $'-q\n-c\na.conf\n--n_head=3\n--print-config\n\n-vc\nshakespeare_char\n--n_layer=1' ""
seed cycle $'include = a.conf\n' $'include = main.conf\n' "" "" ""
seed missing_include $'n_layer = 2\ninclude = nowhere.conf\n' "" "" "" ""
seed duplicate $'n_layer = 2\nn_layer = 3\n' "" "" "" ""
seed schedule "" "" "" $'--warmup_iters=100\n--lr_decay_iters=100\n--min_lr=1' ""
