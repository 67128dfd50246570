# A GPT-2 vocabulary (-V, 50257 tokens) on a char model (58 tokens): gpt-evalppl says so when it
# loads them, as gpt-sample does, in one line (it said "token 50256 is outside the model's
# vocabulary" once the text was encoded). $GPT_VOCAB does not override the checkpoint's own.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=2 --eval_interval=2 --out_dir=o > train.log
head -c 300 d/input.txt > t.txt
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; cat err; }
code gpt-evalppl -m o/latest.safetensors -V "$DATA/gpt2" t.txt | sed "s|$DATA|DATA|"
code gpt-sample -m o/latest.safetensors -V "$DATA/gpt2" -n 3 | sed "s|$DATA|DATA|"
gpt-evalppl -q -m o/latest.safetensors t.txt | cut -c1-10
