# Resident memory bounded by the settings, not the input: one document of 16 MB of one letter
# (a single pre-token; 8 kB as zstd) and one of 44 MB (40 Tiny Shakespeares) without a separator,
# both through zstd in a pipe. Before: a peak RSS of 530 MB and of 3.5 bytes a byte of text (150 MB
# here: the whole document, its tokens and a merge heap of 32 bytes per byte held at once); now
# about 30 MB, and the bound 60 MB. The ids: 4 'a' per token as tiktoken gives (tests/fixtures/long_pieces.txt),
# the text back from -d.
# Then the same 44 MB with --val-fraction (tokens held in a temporary file until the split point
# is known; before: 2.3 bytes a byte, 100 MB) and with --char (the text held to find its
# characters; before: 8.5 bytes a byte): train + validation are the tokens of the run without a
# split, and the char shard decodes back.
source "$TOP/tests/cli/lib.bash"; need_data
[ -x /usr/bin/time ] || { echo "/usr/bin/time not installed (Debian package time)" >&2; exit 77; }
# Under make check or make tsan the sanitizers' shadow memory and quarantine are part of the RSS:
# there the bound is not checked (the outputs still are).
ldd "$(command -v gpt-tokenize)" > ldd.txt
san=$(grep -o -m1 "lib[at]san" ldd.txt || true)
rss() {
  /usr/bin/time -f %M -o rss.txt "$@"; r=$(cat rss.txt)
  [ -n "$san" ] || [ "$r" -lt 60000 ] || echo "peak RSS $r kB"
}
head -c 16M /dev/zero | tr '\0' a | zstd -q > a.zst
rss gpt-tokenize -q -j2 a.zst -o a.bin
header_int a.bin 2
[ "$(od -An -v -tu2 -j1024 a.bin | tr -s ' \n' '\n' | sort -u | tr '\n' ' ')" = " 24794 50256 " ] && echo "all 'aaaa'"
for i in $(seq 40); do cat "$DATA/tinyshakespeare/input.txt"; done | zstd -q -1 > s.zst
rss gpt-tokenize -q -j2 s.zst -o s.bin
header_int s.bin 2
zstd -dc s.zst | cmp - <(gpt-tokenize -d s.bin) && echo "decodes back"
rss gpt-tokenize -q -j2 s.zst -o t.bin --val-fraction 0.1 --val-output v.bin
header_int v.bin 2
cmp <(tail -c +1025 s.bin) <(tail -c +1025 t.bin; tail -c +1025 v.bin) && echo "train + val = all"
rss gpt-tokenize -q -j2 --char s.zst -o c.bin --vocab-out voc.json
header_int c.bin 2
zstd -dc s.zst | cmp - <(gpt-tokenize -d -V voc.json c.bin) && echo "char decodes back"
