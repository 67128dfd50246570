# --max-docs and --max-tokens stop early; --val-docs and --val-tokens send the first documents
# (tokens) to the validation shard, the rest to training: together they are the unsplit run's
# tokens; one of --val-fraction, --val-docs, --val-tokens at a time; -j 1 and -j 2 alike.
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/ in [0-9.]* m*s.*$//' err.txt)"; }
# (-d drops each document's leading <|endoftext|>.) Tiny Shakespeare's paragraphs as JSON Lines, one a line
python3 -c '
import json, sys
for p in open(sys.argv[1]).read().split("\n\n"):
    print(json.dumps({"text": p}))' "$DATA/tinyshakespeare/input.txt" > sh.jsonl
gpt-tokenize -q sh.jsonl -o all.bin
echo "all: $(header_int all.bin 2) tokens, $(ids all.bin | tr ' ' '\n' | grep -c '^50256$') documents"
run gpt-tokenize --max-docs 3 sh.jsonl -o m.bin
gpt-tokenize -q -d m.bin | python3 -c '
import json, sys
want = "<|endoftext|>".join(json.loads(l)["text"] for l in open("sh.jsonl").readlines()[:3])
print("--max-docs 3: the first 3 paragraphs" if sys.stdin.read() == want else "--max-docs 3: WRONG")'
for j in 1 2; do
  gpt-tokenize -q -j $j --max-tokens 12345 sh.jsonl -o t$j.bin
done
cmp t1.bin t2.bin && echo "--max-tokens 12345: $(header_int t1.bin 2) tokens, -j 1 = -j 2"
cmp <(ids t1.bin) <(ids all.bin | cut -d' ' -f1-12345) && echo "the first 12345 of all"
run gpt-tokenize --max-tokens 12345 sh.jsonl -o t.bin
# the summary's bytes are the text encoded into the output, the same for every -j (before: every
# byte read, past the stop too, which depended on the threads): the decoded text's, less the
# <|endoftext|> between documents
for j in 1 2; do
  gpt-tokenize -j $j --max-tokens 12345 sh.jsonl -o t.bin 2> err.txt
  echo "-j $j: $(sed -n 's/.* documents*, \([0-9]*\) bytes,.*/\1/p' err.txt) bytes in the summary," \
    "$(gpt-tokenize -q -d t.bin | sed 's/<|endoftext|>//g' | wc -c) decoded"
done
gpt-tokenize --max-docs 3 --doc-sep $'\n\n' "$DATA/tinyshakespeare/input.txt" -o t.bin 2> err.txt
echo "--max-docs 3 --doc-sep: $(sed -n 's/.* documents*, \([0-9]*\) bytes,.*/\1/p' err.txt) bytes in the summary," \
  "$(gpt-tokenize -q -d t.bin | sed 's/<|endoftext|>//g' | wc -c) decoded"
for j in 1 2; do
  gpt-tokenize -q -j $j --val-tokens 5000 --val-output v$j.bin sh.jsonl -o tr$j --shard-tokens 100K
done
cmp v1.bin v2.bin && cmp tr1_000000.bin tr2_000000.bin && cmp tr1_000002.bin tr2_000002.bin && echo "--val-tokens: -j 1 = -j 2"
echo "--val-tokens 5000: val $(header_int v1.bin 2), train $(for f in tr1_*.bin; do header_int $f 2; done | tr '\n' ' ')"
cmp <({ ids v1.bin; for f in tr1_*.bin; do ids $f; done; } | tr -s ' \n' '\n\n' | grep .) <(ids all.bin | tr ' ' '\n') && echo "val + train = all"
run gpt-tokenize --val-docs 10 --val-output vd.bin sh.jsonl -o td.bin
echo "--val-docs 10: val holds $(ids vd.bin | tr ' ' '\n' | grep -c '^50256$') documents"
cmp <({ ids vd.bin; ids td.bin; } | tr -s ' \n' '\n\n' | grep .) <(ids all.bin | tr ' ' '\n') && echo "val + train = all"
run gpt-tokenize --val-docs 100000 --val-output vx.bin sh.jsonl -o tx.bin
run gpt-tokenize --val-docs 2 --val-fraction 0.1 --val-output v.bin sh.jsonl -o x.bin
test ! -e x.bin
run gpt-tokenize --val-tokens 2 sh.jsonl -o x.bin # without --val-output: beside -o, x_val.bin
gpt-tokenize -q --val-tokens 2 --val-output xv.bin sh.jsonl -o xe.bin
cmp x_val.bin xv.bin && cmp x.bin xe.bin && echo "--val-tokens 2 -o x.bin: x_val.bin, as --val-output x_val.bin"
gpt-tokenize -q --val-docs 3 sh.jsonl -o xs --shard-tokens 100K && ls xs_*
run sh -c 'gpt-tokenize --val-tokens 2 sh.jsonl > /dev/null'
# limits and splits on plain text documents too
for i in 0 1 2 3 4; do echo "doc $i" > f$i.txt; done
gpt-tokenize -q --max-docs 2 --val-docs 1 --val-output fv.bin f*.txt -o ft.bin
echo "text files: val '$(gpt-tokenize -q -d fv.bin)', train '$(gpt-tokenize -q -d ft.bin)'"
