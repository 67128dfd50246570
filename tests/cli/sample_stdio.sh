# gpt-sample and gpt-evalppl with stdout or stderr on a full disk (/dev/full) exit 1, saying so
# in one line (--help and --version exited 0); a closed stdin is said to be closed, not read as
# an empty input: gpt-evalppl with no FILE, gpt-sample -f - (which reads a prompt from stdin).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=2 --eval_interval=2 --out_dir=o > train.log
export GPT_MODEL=o/latest.safetensors
head -c 300 d/input.txt > t.txt
# run CMD...: exit status, then stderr (its lines); the command's stdout is /dev/full
run() { rc=0; "$@" > /dev/full 2> err || rc=$?; echo "exit $rc: $(cat err)"; }
run gpt-sample -n 5
run gpt-sample -q -n 5 --num-samples 3
run gpt-sample -q -n 5 --ids
run gpt-sample --help
run gpt-sample --version
run gpt-evalppl t.txt
run gpt-evalppl -q --json --per-doc t.txt t.txt
run gpt-evalppl --help
run gpt-evalppl --version
rc=0; gpt-sample -n 5 2> /dev/full > /dev/null || rc=$?; echo "sample, stderr full: exit $rc"
rc=0; gpt-evalppl t.txt 2> /dev/full > /dev/null || rc=$?; echo "evalppl, stderr full: exit $rc"
# stdin closed, then stdin as the prompt
rc=0; sh -c 'gpt-evalppl -q <&-' > out 2> err || rc=$?; echo "exit $rc: $(cat err) [$(wc -c < out) bytes]"
rc=0; sh -c 'gpt-sample -q -n 3 -f - <&-' > out 2> err || rc=$?; echo "exit $rc: $(cat err) [$(wc -c < out) bytes]"
printf 'ROMEO:' | gpt-sample -q -n 3 -f - > a; head -c 6 a; echo
gpt-sample -q -n 3 -p 'ROMEO:' <&- > b; cmp a b && echo "-p needs no stdin"
