# gpt-train on a full disk (out_dir on a small tmpfs; a filler file leaves N kB free, or a cap
# on its files): exit 1 with one line naming the file that could not be written, no temporary
# left, latest on a complete checkpoint that verifies, metrics.jsonl ending in a whole line, and
# the run stopped there (at the latest when the next checkpoint is due) rather than trained on.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/disk_full.bash"
tiny_data d
small_fs o 2048
gpt-train -q "${TINY[@]}" --max_iters=3 --eval_interval=3 --out_dir=o > /dev/null # ckpt: 328 kB
cp -a o start
# after: what is left, where latest points, and the last step logged
after() {
  leftovers o; echo "latest: $(readlink o/latest.safetensors || echo none)"
  [ -L o/latest.safetensors ] && gpt-ckpt verify o/latest.safetensors | cut -d' ' -f1-2
  [ -z "$(tail -c 1 o/metrics.jsonl)" ] || echo "metrics.jsonl ends in half a line"
  echo "last step logged: $(losses o/metrics.jsonl | tail -n 1 | cut -d' ' -f1)"
}
# resume KB ARGS...: from the step-3 checkpoint with KB kB free
resume() {
  small_fs o 2048; cp -a start/. o/; fill o "$1"; shift
  try gpt-train -q "${TINY[@]}" --eval_interval=3 --out_dir=o --init_from=resume "$@"
}
echo "== resumed on a full disk: step 6's loss.svg or checkpoint fails; the run stops by step 9"
# 0 kB: loss.svg (rewritten at the eval before the checkpoint); 8: the checkpoint (written in
# the background) at its first pages; 100: midway; 328: its last page
# (with room for some of the checkpoint, written in the background, it and loss.svg race for the
# space left: either may be refused)
for kb in 0 8 100 328; do
  resume $kb --max_iters=30 --lr_decay_iters=30 |
    if [ $kb != 0 ]; then sed -E 's#: o/(ckpt_00000006\.safetensors|loss\.svg): No space#: o/ckpt_00000006.safetensors or o/loss.svg: No space#'; else cat; fi
  after | sed 's/^last step logged: [6-9]$/last step logged: 6 to 9/'
done
echo "== the last checkpoint (step 6 = max_iters) fails: the run's end waits for it"
resume 100 --max_iters=6
after
echo "== ... with 2 ranks: rank 1's writer streams its slice to rank 0's, which fails; both end"
resume 100 --max_iters=6 --nproc_per_node=2 --dist_timeout=30 |
  sed -E 's/ \(pid [0-9]+\)//; s/; stopped the other ranks//' # (whether rank 1 had ended: a race)
after
echo "== metrics.jsonl's next line does not fit (no eval, no checkpoint due)"
resume 0 --max_iters=100 --eval_interval=100 --lr_decay_iters=100
after | sed 's/^last step logged: [0-9]*$/last step logged: N/'
echo "== the disk has room again: the run continues from latest"
rm o/filler
gpt-train -q "${TINY[@]}" --max_iters=9 --eval_interval=3 --out_dir=o --init_from=resume | grep '^step 9/9' | cut -d'|' -f1
echo "== out of inodes: the lock file (1), latest re-pointed to step 3 (5), to step 6 (7)"
for n in 1 5 7; do
  small_fs o 2048 $n
  # the checkpoint writer's link and loss.svg race for the last inode: either may be refused
  try gpt-train -q "${TINY[@]}" --max_iters=6 --eval_interval=3 --out_dir=o |
    sed -E 's#: o/(latest\.safetensors|loss\.svg: cannot create a file in o): No space#: o/latest.safetensors or o/loss.svg: No space#'
  leftovers o; echo "latest: $(readlink o/latest.safetensors || echo none)"
done
