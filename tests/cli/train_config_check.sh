# The whole config is checked first: a mistake across keys is one line led by the FILE:LINE (or
# --key) of a key at fault and naming the other's origin, exit 2, before any effective config is
# printed, out_dir is created or data is read (none exists here). Duplicate keys in one file name
# both lines; a missing include exits 2; dtype takes nanoGPT's names and the short aliases.
source "$TOP/tests/cli/lib.bash"
unset GPT_CONFIG_DIR GPTKIT_CONFIG_DIR
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt)"; }
printf 'n_layer = 2\nn_head = 3\nn_embd = 32\nout_dir = o\n' > shape.conf
run gpt-train -c shape.conf
run gpt-train -c shape.conf --n_head=5
run gpt-train -c shape.conf --n_head=4 --n_embd=30
run gpt-train --out_dir=o --n_embd=100
run gpt-train --out_dir=o --warmup_iters=100 --lr_decay_iters=100
run gpt-train --out_dir=o --lr_decay_iters=50
run gpt-train --out_dir=o --learning_rate=1e-4 --min_lr=1e-3
run gpt-train --out_dir=o --batch_size=4096 --block_size=1048576
run gpt-train --out_dir=
run gpt-train --out_dir=o --train_data=
test ! -e o
# with decay_lr = false there is no decay to check
gpt-train --warmup_iters=100 --lr_decay_iters=100 --min_lr=1 --decay_lr=false --print-config | grep '^lr_decay_iters'
# duplicate keys, missing include
printf 'n_layer = 2\nn_embd = 64\n# again:\nn_layer = 4\n' > dup.conf
run gpt-train -c dup.conf
printf 'batch_size = 2\ninclude = base.conf\n' > inc.conf
run gpt-train -c inc.conf
# a file may override what it includes (the later value wins)
printf 'n_layer = 6\nbatch_size = 3\n' > base.conf
printf 'include = base.conf\nn_layer = 2\n' > top.conf
gpt-train -c top.conf --print-config | grep -E '^(n_layer|batch_size) '
# dtype: auto or nanoGPT's names, the short aliases stored as nanoGPT's name; float16 is refused
gpt-train --dtype=fp32 --print-config | grep '^dtype'
printf 'dtype = bf16\ndevice = cpu\n' > bf16.conf
run gpt-train -c bf16.conf
run gpt-train --dtype=float16
run gpt-train --dtype=half
test ! -e out
# the options: one gk_opt table, as in the other tools
run gpt-train --quiet=1
run gpt-train --n_layer 3
run gpt-train -c
gpt-train --help | grep -E '^usage:|--KEY=VALUE|^  --n_head='
gpt-train --version | sed 's/) .*/)/'
