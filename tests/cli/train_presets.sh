# `-c NAME` finds presets in PREFIX/share/gptkit/configs of the PREFIX the binary is installed in
# (BIN/../share/gptkit, found at run time), whatever PREFIX it was built with: here a copy of the
# built binary in a fresh prefix, as `make install PREFIX=...` after a plain `make` leaves it.
# A binary of a build directory at the top of a checkout finds that checkout's presets. Every
# shipped preset passes the config checks.
source "$TOP/tests/cli/lib.bash"
unset GPT_CONFIG_DIR GPTKIT_CONFIG_DIR
prefix=$PWD/prefix
mkdir -p "$prefix/bin" "$prefix/share/gptkit/configs" work
cp "$(command -v gpt-train)" "$prefix/bin/"
printf 'n_layer = 3\nn_head = 3\nn_embd = 48\n' > "$prefix/share/gptkit/configs/mine.conf"
cd work
show() { "$prefix/bin/gpt-train" "$@" --print-config | grep -E '^n_(layer|embd) ' | sed "s|$prefix|PREFIX|"; }
show -c mine.conf
show -c mine
printf 'include = mine.conf\nn_layer = 2\n' > local.conf
show -c local.conf
rc=0; "$prefix/bin/gpt-train" -c nope.conf 2> err.txt || rc=$?
echo "exit $rc: $(sed "s|$prefix|PREFIX|" err.txt)"
cd ..
# the built binary, on the PATH as the README's tour has it, run outside the checkout: the
# checkout's presets (BUILD/../train/configs) before any installed ones (was: not found)
(cd work && gpt-train -c shakespeare.conf --print-config | grep '^n_layer ' | sed "s|$TOP|TOP|")
for p in "$TOP"/train/configs/*.conf; do
  gpt-train -c "$p" --print-config > /dev/null && echo "ok $(basename "$p")"
done
# $GPT_CONFIG_DIR's presets before the installed ones; GPTKIT_CONFIG_DIR, its old name, is still
# read, and GPT_CONFIG_DIR wins over it
mkdir -p mydir other && printf 'n_layer = 5\n' > mydir/mine.conf && printf 'n_layer = 7\n' > other/mine.conf
cfg() { "$prefix/bin/gpt-train" -c mine --print-config | grep '^n_layer ' | sed "s|$PWD|DIR|"; }
GPT_CONFIG_DIR=$PWD/mydir cfg
GPTKIT_CONFIG_DIR=$PWD/mydir cfg
GPT_CONFIG_DIR=$PWD/other GPTKIT_CONFIG_DIR=$PWD/mydir cfg
