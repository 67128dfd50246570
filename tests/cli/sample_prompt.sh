# gpt-sample's prompt with a BPE model (the tiny transformers fixture): invalid UTF-8 is replaced
# by U+FFFD with a warning giving the count, as gpt-tokenize does (it was replaced silently), from
# -p and from -f; the ids are those of the text with U+FFFD written out; a literal <|endoftext|>
# in a prompt is that token.
source "$TOP/tests/cli/lib.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o m.safetensors
export GPT_MODEL=m.safetensors
gpt-sample -n 0 --ids -p $'ab\x80 cd\xc3' > bad.ids 2> err
grep -v 'tokens/s' err
gpt-sample -q -n 0 --ids -p $'ab\xef\xbf\xbd cd\xef\xbf\xbd' > good.ids
cmp bad.ids good.ids && echo "same ids as U+FFFD"
printf 'x\xffy' > p.txt
gpt-sample -n 2 -f p.txt 2>&1 > /dev/null | grep -v 'tokens/s'
gpt-sample -n 2 -p 'plain text' 2>&1 > /dev/null | grep -c warning || true
gpt-sample -q -n 0 --ids -p 'a<|endoftext|>b'
