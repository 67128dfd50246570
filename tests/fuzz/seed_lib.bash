# seed_lib.bash: what the seed scripts (tests/fuzz/seed_NAME.sh) share; sourced by them.
# seed_begin NAME [BUILD]: sets top, bin (BUILD/bin, default build) and out
# (tests/fuzz/corpus/NAME), and moves into a temporary directory removed at exit.
seed_begin() {
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  bin=$(cd "${2:-$top/build}" && pwd)/bin
  out=$top/tests/fuzz/corpus/$1
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  cd "$work"
}
# tiny_ckpt TEXT TIMES BLOCK: a char-level model (n_layer=1, n_embd=8, block_size BLOCK) trained
# one step on TEXT repeated TIMES times: o/ckpt_00000001.safetensors (with its AdamW moments).
tiny_ckpt() {
  local i
  for ((i = 0; i < $2; i++)); do printf '%s' "$1"; done > input.txt
  "$bin/gpt-tokenize" -q --char input.txt --vocab-out vocab.json -o train.bin
  "$bin/gpt-train" -q --train_data=train.bin --val_data=train.bin --vocab=vocab.json --n_layer=1 \
    --n_head=2 --n_embd=8 --block_size="$3" --batch_size=2 --max_iters=1 --eval_interval=1 \
    --eval_iters=1 --warmup_iters=1 --threads=1 --out_dir=o > /dev/null
}
