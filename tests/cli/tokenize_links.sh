# Archive members that are not regular files: links (symbolic and hard), devices, FIFOs. They were
# skipped without a word; now they are counted like binary members. Directories are not counted.
# The tar is written by Python's tarfile, which records devices and FIFOs without making them.
source "$TOP/tests/cli/lib.bash"; need_data
python3 - <<'PY'
import io, tarfile
def add(t, name, kind, data=b"", link=""):
    i = tarfile.TarInfo(name)
    i.type, i.size, i.linkname = kind, len(data), link
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        i.devmajor, i.devminor = 1, 3
    t.addfile(i, io.BytesIO(data) if data else None)
for fmt, name in ((tarfile.GNU_FORMAT, "gnu.tar"), (tarfile.PAX_FORMAT, "pax.tar")):
    with tarfile.open(name, "w", format=fmt) as t:
        add(t, "d", tarfile.DIRTYPE)
        add(t, "d/a.txt", tarfile.REGTYPE, b"First document.\n")
        add(t, "d/sym", tarfile.SYMTYPE, link="a.txt")
        add(t, "d/hard", tarfile.LNKTYPE, link="d/a.txt")
        add(t, "d/fifo", tarfile.FIFOTYPE)
        add(t, "d/null", tarfile.CHRTYPE)
        add(t, "d/sda", tarfile.BLKTYPE)
        add(t, "d/b.txt", tarfile.REGTYPE, b"Second one.\n")
with tarfile.open("one.tar", "w") as t:
    add(t, "a.txt", tarfile.REGTYPE, b"First document.\n")
    add(t, "sym", tarfile.SYMTYPE, link="a.txt")
    add(t, "c.bin", tarfile.REGTYPE, b"\x01\x00\x02")
import zipfile
with zipfile.ZipFile("sym.zip", "w") as z:
    z.writestr("a.txt", "First document.\n")
    i = zipfile.ZipInfo("sym")
    i.create_system, i.external_attr = 3, 0o120777 << 16  # a Unix symbolic link, as zip -y stores
    z.writestr(i, "a.txt")
PY
printf 'First document.\n' > a.txt; printf 'Second one.\n' > b.txt
gpt-tokenize -q a.txt b.txt -o want.bin
for f in gnu.tar pax.tar; do
  gpt-tokenize "$f" -o "$f.bin" 2> err.txt
  cmp want.bin "$f.bin" && echo "$f: the two regular files"
  sed -E 's/in [0-9.]+ m?s/in T/' err.txt
done
zstd -q -c gnu.tar | gpt-tokenize -o z.bin 2>&1 | sed -E 's/in [0-9.]+ m?s/in T/'
cmp want.bin z.bin && echo "through zstd on stdin: the same"
# with a binary member too, and the singular; a symbolic link in a zip
for f in one.tar sym.zip; do
  gpt-tokenize "$f" -o "$f.bin" 2>&1 | sed -E 's/in [0-9.]+ m?s/in T/'
  ids "$f.bin"
done
