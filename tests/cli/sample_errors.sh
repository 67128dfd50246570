# gpt-sample errors: a bad checkpoint path is one line and exit 1; bad options exit 2.
source "$TOP/tests/cli/lib.bash"
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; wc -l < err; }
code gpt-sample -m nope.safetensors -n 5
cat err
printf 'not a checkpoint at all' > bad.safetensors
code gpt-sample -m bad.safetensors
code gpt-sample --bogus
code gpt-sample -t -1
code gpt-sample --top-p 0
code gpt-sample -p a -f b
gpt-sample --help | head -n 1
