# Config mistakes: one line naming file:line (or the option) and the nearest key; exit 2.
source "$TOP/tests/cli/lib.bash"
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed "s|$TOP|TOP|g" err.txt)"; }
printf 'batch_size = 4\nlerning_rate = 1e-3\n' > typo.conf
run gpt-train -c typo.conf
printf 'dropout = lots\n' > bad.conf
run gpt-train -c bad.conf
run gpt-train --n_layr=3
run gpt-train --learning_rate=-1
run gpt-train -c nonexistent.conf
run gpt-train -q --train_data=nothing-here.bin --out_dir=o
run gpt-train stray
