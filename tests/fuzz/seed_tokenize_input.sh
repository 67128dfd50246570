#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/tokenize_input: gpt-tokenize inputs made with standard tools (tar,
# zip, gzip, bzip2, xz, zstd, lz4; 7z through libarchive's own writer, by python3's ctypes):
# plain text (empty, with NULs), each compressed file (and a gzip of a gzip, refused), tar
# (ustar, pax and GNU long names, a directory, a symlink, a binary member), tar.gz/.xz/.zst, zip
# (stored, deflated, streamed with data descriptors), 7z, and truncated ones. A few KB in all.
# Usage: tests/fuzz/seed_tokenize_input.sh   (needs no gptkit build)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/tests/fuzz/corpus/tokenize_input
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rm -rf "$out" && mkdir -p "$out" && cd "$work"
export TZ=UTC LC_ALL=C
tar=(tar --blocking-factor=1 --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name)

mkdir d && printf 'First Citizen:\nBefore we proceed any further, hear me speak.\n' >d/a.txt
printf 'All:\nSpeak, speak.\n\n<|endoftext|>Second\n' >d/b.txt
printf 'bin\0ary\n' >d/c.bin && mkdir d/sub && ln -s a.txt d/link
touch -d @0 d d/* && touch -h -d @0 d/link

cp d/a.txt "$out/plain.txt"
: >"$out/empty"
printf 'text with a NUL\0 in it\n' >"$out/nul.txt"
gzip -9nc d/a.txt >"$out/a.txt.gz"
bzip2 -9c d/a.txt >"$out/a.txt.bz2"
xz -c d/a.txt >"$out/a.txt.xz"
xz --format=lzma -c d/a.txt >"$out/a.txt.lzma"
zstd -q -c d/a.txt >"$out/a.txt.zst"
lz4 -q -c d/a.txt >"$out/a.txt.lz4"
gzip -nc d/b.txt | gzip -nc >"$out/b.txt.gz.gz"
"${tar[@]}" --format=ustar -cf - -C d a.txt b.txt >"$out/ab.tar"
"${tar[@]}" --format=ustar -cf - -C d . | gzip -9nc >"$out/all.tar.gz"
"${tar[@]}" --format=pax -cf - -C d a.txt | xz -c >"$out/pax.tar.xz"
cp d/b.txt "d/a_name_longer_than_one_hundred_bytes_$(printf 'x%.0s' {1..80}).txt"
"${tar[@]}" --format=gnu -cf - -C d . | zstd -q -c >"$out/gnu-long-names.tar.zst"
(cd d && zip -q -X -0 "$out/stored.zip" a.txt c.bin && zip -q -X -r "$out/deflated.zip" .)
printf 'streamed through zip\n' | zip -q -X - - >"$out/streamed.zip"
head -c 100 "$out/all.tar.gz" >"$out/truncated.tar.gz"
head -c 700 "$out/ab.tar" >"$out/truncated.tar"
head -c 150 "$out/deflated.zip" >"$out/truncated.zip"
head -c 40 "$out/a.txt.xz" >"$out/truncated.xz"

# 7z: libarchive writes it (no 7z tool needed); one text, LZMA2 and stored.
python3 - "$out" <<'EOF'
import ctypes, ctypes.util, sys
la = ctypes.CDLL(ctypes.util.find_library("archive") or "libarchive.so.13")
la.archive_write_new.restype = la.archive_entry_new.restype = ctypes.c_void_p
for f in ("archive_write_set_format_7zip", "archive_write_set_format_option", "archive_write_open_filename",
          "archive_write_header", "archive_write_data", "archive_write_close", "archive_write_free",
          "archive_entry_set_pathname", "archive_entry_set_size", "archive_entry_set_filetype",
          "archive_entry_set_perm", "archive_entry_free"):
    getattr(la, f).argtypes = None
for method in ("lzma2", "copy"):
    a = ctypes.c_void_p(la.archive_write_new())
    la.archive_write_set_format_7zip(a)
    la.archive_write_set_format_option(a, b"7zip", b"compression", method.encode())
    la.archive_write_open_filename(a, f"{sys.argv[1]}/{method}.7z".encode())
    for name, text in ((b"a.txt", b"First Citizen:\nBefore we proceed.\n"), (b"b.txt", b"All:\nSpeak.\n")):
        e = ctypes.c_void_p(la.archive_entry_new())
        la.archive_entry_set_pathname(e, name)
        la.archive_entry_set_size(e, ctypes.c_int64(len(text)))
        la.archive_entry_set_filetype(e, 0o100000)
        la.archive_entry_set_perm(e, 0o644)
        la.archive_write_header(a, e)
        la.archive_write_data(a, text, ctypes.c_size_t(len(text)))
        la.archive_entry_free(e)
    la.archive_write_close(a)
    la.archive_write_free(a)
EOF
head -c 60 "$out/lzma2.7z" >"$out/truncated.7z"
