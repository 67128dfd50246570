# Bad input: one line naming the input, exit 1 (2 for usage), and never a half-written output.
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt)"; }
run gpt-tokenize nope.txt -o a.bin
test ! -e a.bin
gzip -c "$DATA/tinyshakespeare/input.txt" > full.gz; head -c 20000 full.gz > cut.gz
run gpt-tokenize cut.gz -o b.bin
test ! -e b.bin && ! ls b.bin.tmp* 2>/dev/null
# a text whose first bytes are a format's magic ("PK00": a split zip's) is read as that format
printf 'PK00 is how this text starts\n' > pk00.txt
run gpt-tokenize pk00.txt -o g.bin
test ! -e g.bin
printf 'hello\n' > ok.txt
run gpt-tokenize ok.txt -o /nonexistent/c.bin
run sh -c 'gpt-tokenize -q ok.txt > /dev/full' 
mkdir badvocab; cp "$DATA/gpt2/vocab.bpe" badvocab/; head -c 1000 "$DATA/gpt2/encoder.json" > badvocab/encoder.json
run gpt-tokenize -V badvocab ok.txt -o d.bin
test ! -e d.bin
run gpt-tokenize -V nodir ok.txt -o e.bin
run gpt-tokenize --threads 0 ok.txt
run gpt-tokenize --bogus
run sh -c 'gpt-tokenize --val-fraction 0.1 ok.txt > /dev/null'
run gpt-tokenize --val-output v.bin ok.txt -o f.bin
mkdir emptydir; run gpt-tokenize emptydir
# invalid UTF-8: replaced by U+FFFD (as Python's errors="replace"), one warning with the count
printf 'a\xffb\xe2\x82' > bad.txt
printf 'a\xef\xbf\xbdb\xef\xbf\xbd' > fixed.txt
gpt-tokenize bad.txt -o bad.bin 2> warn.txt
grep -c 'replaced 2 invalid UTF-8 sequences with U+FFFD' warn.txt
gpt-tokenize -q fixed.txt -o fixed.bin
cmp bad.bin fixed.bin && echo same
