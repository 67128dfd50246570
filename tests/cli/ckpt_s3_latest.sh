# The paths a user writes for a local run's checkpoint work the same for an out_dir in a bucket
# (common/io/ckpt_where.h), in every tool that takes one: OUT_DIR/latest.safetensors, the pointer
# OUT_DIR/latest (in a bucket) and OUT_DIR itself stand for the latest checkpoint, in gpt-sample
# -m, gpt-evalppl -m, gpt-ckpt info/verify/convert/export and gpt-train's init_from; against
# moto's S3 server (skipped without moto). Each gives what the local file gives.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/s3.bash"
tiny_data d
mkdir tmp
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port TMPDIR=$PWD/tmp
gpt-train -q "${TINY[@]}" --max_iters=2 --out_dir=out > /dev/null
gpt-train -q "${TINY[@]}" --max_iters=2 --out_dir=s3://gk-test/runs/w > /dev/null
s3py 'print("runs/w:", " ".join(k[7:] for k in keys("gk-test") if k.startswith("runs/w/")))'
gpt-sample -q -m out/latest.safetensors -n 16 --seed 7 --ids > want.ids
gpt-evalppl -q -m out/latest.safetensors --json d/val.bin > want.json
same() { cmp -s - "$1" && echo same || echo DIFFERENT; }
echo "gpt-sample -m out: $(gpt-sample -q -m out -n 16 --seed 7 --ids | same want.ids)"
echo "gpt-sample -m s3://gk-test/runs/w/latest.safetensors: $(gpt-sample -q -m s3://gk-test/runs/w/latest.safetensors -n 16 --seed 7 --ids | same want.ids)"
echo "gpt-evalppl -m s3://gk-test/runs/w/latest: $(gpt-evalppl -q -m s3://gk-test/runs/w/latest --json d/val.bin | same want.json)"
echo "GPT_MODEL=s3://gk-test/runs/w gpt-evalppl: $(GPT_MODEL=s3://gk-test/runs/w gpt-evalppl -q --json d/val.bin | same want.json)"
gpt-ckpt verify -q s3://gk-test/runs/w/
gpt-ckpt info s3://gk-test/runs/w 2>&1 >/dev/null | grep -o 'downloading .*'
gpt-ckpt convert -q s3://gk-test/runs/w/latest -o w16.safetensors --dtype bfloat16 && gpt-ckpt verify -q w16.safetensors
# init_from: a path (an out_dir in a bucket) to start a new run from
gpt-train "${TINY[@]}" --max_iters=3 --init_from=s3://gk-test/runs/w --out_dir=f > /dev/null 2> f.err
grep -o 'from s3://[^ ]*' f.err | head -1
gpt-train -q "${TINY[@]}" --max_iters=3 --init_from=out --out_dir=g > /dev/null && echo "init_from=out: trained"
# a prefix without a checkpoint: what is said without the rewriting
rc=0; gpt-sample -q -m s3://gk-test/runs/none -n 1 > /dev/null 2> err.txt || rc=$?
sed "s/127.0.0.1:$port/ENDPOINT/g" err.txt; echo "exit $rc"
ls tmp | wc -l
