# Archives and compressed inputs, detected by content (names are misleading on purpose): each
# member is a document starting with <|endoftext|>; binary members are skipped with a count.
source "$TOP/tests/cli/lib.bash"; need_data
mkdir d
printf 'First document.\n' > d/a.txt
printf 'Second one, with \xc3\xa9t\xc3\xa9.\n' > d/b.txt
head -c 100 /dev/urandom > d/c.bin; printf '\0' >> d/c.bin   # a NUL: binary, skipped
gpt-tokenize -q d/a.txt d/b.txt -o want.bin
want=$(ids want.bin)
tar -C d -cf t.tar a.txt b.txt c.bin
gzip -c t.tar > t.tgz; xz -c t.tar > t.txz; zstd -q -c t.tar > t.tzst
(cd d && zip -q ../z.zip a.txt b.txt c.bin)
cp t.tgz looks-like.txt
for f in t.tar t.tgz t.txz t.tzst z.zip looks-like.txt; do
  gpt-tokenize "$f" -o "$f.bin" 2> "$f.err"
  [ "$(ids "$f.bin")" = "$want" ] || { echo "$f: tokens differ" >&2; exit 1; }
  grep -q "skipped 1 binary archive member" "$f.err" || { echo "$f: no skip count" >&2; cat "$f.err" >&2; exit 1; }
done
# single compressed files are one document, and plain files are text even with a NUL
gpt-tokenize -q d/a.txt -o a.bin
lz4=(); command -v lz4 > /dev/null && lz4=("lz4 -q -c") # lz4 (the tool) is not in .ci/deps.sh
for z in "gzip -c" "xz -c" "zstd -q -c" "bzip2 -c" "lzma -c" "${lz4[@]}"; do
  $z d/a.txt > a.z
  gpt-tokenize -q < a.z > az.bin
  [ "$(ids az.bin)" = "$(ids a.bin)" ] || { echo "$z: differs" >&2; exit 1; }
done
# every filter also under tar; and 7z (made by libarchive's writer: 2 members, "First document.\n"
# and "Second one.\n"), the formats that --help and the man page name
for z in "bzip2 -c" "lzma -c" "${lz4[@]}"; do
  $z t.tar > t.tz
  gpt-tokenize t.tz -o tz.bin 2> tz.err
  [ "$(ids tz.bin)" = "$want" ] || { echo "tar | $z: differs" >&2; exit 1; }
done
echo 'N3q8ryccAAPsTnI9hQAAAAAAAAAgAAAAAAAAAMgiWA8AIxpKR1zpihXS/YMeilOpm18R8q4Q+rO0j2Y0OJ+f62lj//BeQAAAAIEzB64P0Hif/J8/R0Fc9mccFgU19bJ2rWAOOcXCqCkzSIqKkRLhSGQw4AodrArOtUBP8NqK2klAHjO5MvnBvoJLtBQv75ikbbwd1dIpqbNagQJWUHtQTv/4WeAAFwYnAQleAAcLAQABIwMBAQVdAACAAAxqCgGNbvqYAAA=' | base64 -d > t.7z
printf 'Second one.\n' > d/b2.txt
gpt-tokenize -q d/a.txt d/b2.txt -o want7.bin
gpt-tokenize -q t.7z -o t7.bin
cmp want7.bin t7.bin && echo "7z: same"
printf 'a\0b' > nul.txt
gpt-tokenize -q nul.txt -o nul.bin
ids nul.bin
