# A full disk found only at fsync (ext4's delayed allocation, NFS, quotas: the writes succeed and
# the space runs out when the data goes to disk), injected with an LD_PRELOAD fsync that fails
# with ENOSPC for the files whose path holds $FAIL_FSYNC: one line naming the file, exit 1, the
# temporary removed, and what was there before kept.
source "$TOP/tests/cli/lib.bash"; need_data
command -v cc > /dev/null || { echo "no C compiler for the fsync shim" >&2; exit 77; }
cat > shim.c <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int fsync(int fd)
{
    char link[64], path[4096];
    const char *pat = getenv("FAIL_FSYNC");
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    if (pat && *pat && strstr(path, pat)) {
        errno = ENOSPC;
        return -1;
    }
    return 0;
}
int fdatasync(int fd) { return fsync(fd); }
C
cc -shared -fPIC -o shim.so shim.c
# (under make check the shim comes before libasan: ASan is told that this is meant)
shim() {
  local pat=$1; shift
  FAIL_FSYNC=$pat LD_PRELOAD=$PWD/shim.so ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 "$@"
}
try() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt)"; }
listing() { echo "in $1:" $(ls -A "$1"); }
head -c 20000 "$DATA/tinyshakespeare/input.txt" > in.txt
echo "== gpt-tokenize"
mkdir t; echo old > t/t.bin
try shim t.bin gpt-tokenize -q in.txt -o t/t.bin; listing t; cat t/t.bin
try shim v.bin gpt-tokenize -q in.txt -o t/t.bin --val-fraction 0.1 --val-output t/v.bin; listing t; cat t/t.bin
# the training shard's commit comes after the validation shard's: that one is removed again
try shim t/t.bin gpt-tokenize -q in.txt -o t/t.bin --val-fraction 0.1 --val-output t/v.bin; listing t; cat t/t.bin
rm t/t.bin
try shim s_000001 gpt-tokenize -q in.txt -o t/s --shard-tokens 2000; listing t
echo "== gpt-train"
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=3 --eval_interval=3 --out_dir=o > /dev/null
for f in loss.svg ckpt_00000006; do
  try shim $f gpt-train -q "${TINY[@]}" --max_iters=9 --eval_interval=3 --out_dir=o --init_from=resume
  listing o; echo "latest: $(readlink o/latest.safetensors)"
done
gpt-ckpt verify o/latest.safetensors | cut -d' ' -f1-2
echo "== gpt-ckpt"
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors
gpt-ckpt convert -q a.safetensors -o h.safetensors --dtype bf16
mkdir k
try shim m.safetensors gpt-ckpt import -q "$FIX/hf_tiny" -o k/m.safetensors; listing k
try shim c.safetensors gpt-ckpt convert -q a.safetensors -o k/c.safetensors --dtype bf16; listing k
try shim config.json gpt-ckpt export -q a.safetensors --hf k/hf; listing k
try shim m.bin gpt-ckpt export -q a.safetensors --llmc k/m.bin; listing k
gpt-ckpt export -q h.safetensors --hf k/hf; (cd k/hf && md5sum *) > before.txt
try shim config.json gpt-ckpt export -q a.safetensors --hf k/hf; listing k/hf
(cd k/hf && md5sum *) | cmp -s - before.txt && echo "k/hf unchanged"
