# A checkpoint that cannot be written ends the run with exit 1 and one line naming the file. Here
# the file size limit (as a full disk) stops the background write of step 6 midway; the next
# checkpoint (step 9) returns its error. No temporary is left, latest stays on the last complete
# checkpoint (step 3), and a run resumes from it.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=3 --eval_interval=3 --out_dir=o > /dev/null
half=$(( $(stat -c %s o/ckpt_00000003.safetensors) / 1024 )) # in 512-byte blocks: half the file
rc=0; (trap '' XFSZ; ulimit -f $half; exec gpt-train -q "${TINY[@]}" --max_iters=9 --eval_interval=3 \
  --out_dir=o --init_from=resume > log.txt 2> err.txt) || rc=$?
echo "exit $rc"; cat err.txt
ls o
readlink o/latest.safetensors
gpt-train -q "${TINY[@]}" --max_iters=4 --eval_interval=4 --out_dir=o --init_from=resume > log.txt
grep -c '^step 4/4' log.txt
readlink o/latest.safetensors
