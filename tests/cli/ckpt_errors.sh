# gpt-ckpt refuses bad inputs with one line naming the file and the problem, exit 1 (usage: 2),
# and leaves no output behind: truncated safetensors, bad JSON header, shapes that do not match
# config.json, pickle files, a truncated llm.c file, a non-gptkit file given to export, a gptkit
# checkpoint given to import, an export onto a file or into a missing directory, a token shard
# or an llm.c checkpoint given to info, verify, export or convert, a FIFO given to import or info.
source "$TOP/tests/cli/lib.bash"
set +e
# model NAME: a copy of the tiny HuggingFace fixture in NAME/
model() { mkdir -p "$1"; cp "$FIX"/hf_tiny/{config.json,model.safetensors,vocab.json,merges.txt} "$1"; }
try() { "$@" 2>&1; echo "exit $?"; }

model trunc; head -c 100000 "$FIX/hf_tiny/model.safetensors" > trunc/model.safetensors
try gpt-ckpt import trunc
model hdr; printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": [1, 2, }  ' > hdr/model.safetensors
try gpt-ckpt import hdr/model.safetensors
model wide; sed -i 's/"n_embd": 32/"n_embd": 64/' wide/config.json
try gpt-ckpt import wide
model deep; sed -i 's/"n_layer": 2/"n_layer": 3/' deep/config.json
try gpt-ckpt import deep
model shallow; sed -i 's/"n_layer": 2/"n_layer": 1/' shallow/config.json
try gpt-ckpt import shallow
model vocab; sed -i 's/"vocab_size": 301/"vocab_size": 300/' vocab/config.json
try gpt-ckpt import vocab
model bert; sed -i 's/"model_type": "gpt2"/"model_type": "bert"/' bert/config.json
try gpt-ckpt import bert
model badjson; echo '{"n_layer": 2,' > badjson/config.json
try gpt-ckpt import badjson
mkdir alone; cp "$FIX/hf_tiny/model.safetensors" alone/
try gpt-ckpt import alone/model.safetensors
mkdir pt; printf 'PK\003\004pickle inside' > pt/pytorch_model.bin
try gpt-ckpt import pt
printf '\200\002}q\000.' > old.bin
try gpt-ckpt import old.bin
gpt-ckpt import -q "$FIX/hf_tiny" -o ok.safetensors
gpt-ckpt export -q ok.safetensors --llmc ok.bin
head -c 5000 ok.bin > cut.bin
try gpt-ckpt import cut.bin
try gpt-ckpt info trunc/model.safetensors
cp "$FIX/hf_tiny/model.safetensors" hf.safetensors
try gpt-ckpt export hf.safetensors --hf out
try gpt-ckpt import ./nope
try gpt-ckpt import ok.safetensors
try gpt-ckpt import ok.safetensors -o again.safetensors
echo "not a directory" > notdir
try gpt-ckpt export ok.safetensors --hf notdir
try gpt-ckpt export ok.safetensors --hf nodir/sub
# a token shard and an llm.c checkpoint where a checkpoint goes: named, with what reads them
printf 'hello\n' | gpt-tokenize -q --char -o shard.bin
try gpt-ckpt info shard.bin
try gpt-ckpt verify shard.bin
try gpt-ckpt export shard.bin --hf out2
try gpt-ckpt convert --dtype bf16 shard.bin -o x.safetensors
try gpt-ckpt info ok.bin
try gpt-ckpt verify ok.bin
try gpt-ckpt convert --dtype bf16 ok.bin -o x.safetensors
echo "== usage"
try gpt-ckpt
try gpt-ckpt frobnicate
try gpt-ckpt import
try gpt-ckpt import --bogus x
try gpt-ckpt export ok.safetensors
try gpt-ckpt convert ok.safetensors -o x.safetensors
try gpt-ckpt convert ok.safetensors -o x.safetensors --dtype int4
try gpt-ckpt convert ok.safetensors ok.bin -o x.safetensors --dtype fp16
try gpt-ckpt info --version
# a FIFO without a writer, given to import and to info: refused at once, not waited on
mkfifo fifo.bin fifo.safetensors
try gpt-ckpt import fifo.bin
try gpt-ckpt info fifo.safetensors
rm fifo.bin fifo.safetensors
echo "== left behind"
ls
