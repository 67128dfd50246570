# gpt-ckpt import, convert and export on a full disk (a small tmpfs; a filler file leaves N kB
# free, so that the write fails at the header, midway, or at its last page; for export --hf at
# each of its files): exit 1, one line naming the file and "No space left on device", nothing
# left behind, and an export into an existing directory leaves its files as they were.
source "$TOP/tests/cli/lib.bash"
source "$TOP/tests/cli/disk_full.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors # 150 kB
gpt-ckpt convert -q a.safetensors -o h.safetensors --dtype bf16 # 79 kB
small_fs fs 1024
echo "== import"
for kb in 0 64 148; do
  fill fs $kb; try gpt-ckpt import -q "$FIX/hf_tiny" -o fs/m.safetensors; leftovers fs
done
echo "== convert"
for kb in 0 40 76; do
  fill fs $kb; try gpt-ckpt convert -q a.safetensors -o fs/c.safetensors --dtype bf16; leftovers fs
done
fill fs 96; gpt-ckpt convert -q a.safetensors -o fs/c.safetensors --dtype bf16 && gpt-ckpt verify fs/c.safetensors | cut -d' ' -f1-2
rm fs/c.safetensors
echo "== export --hf into a new directory"
# model.safetensors (nothing free, then its last page), vocab.json, merges.txt, tokenizer.json,
# config.json, generation_config.json
for kb in 0 144 148 152 156 160 164; do
  fill fs $kb; try gpt-ckpt export -q a.safetensors --hf fs/hf; leftovers fs
done
echo "== export --hf into an existing directory (of the bf16 model)"
rm fs/filler; gpt-ckpt export -q h.safetensors --hf fs/hf
(cd fs/hf && md5sum *) > before.txt
for kb in 0 148 164; do
  fill fs $kb; try gpt-ckpt export -q a.safetensors --hf fs/hf; leftovers fs/hf
  (cd fs/hf && md5sum *) | cmp -s - before.txt && echo "fs/hf unchanged"
done
fill fs 168; gpt-ckpt export -q a.safetensors --hf fs/hf; leftovers fs/hf
(cd fs/hf && md5sum *) | cmp -s - before.txt || echo "fs/hf: the new export"
rm -r fs/hf
echo "== export --llmc"
for kb in 0 100; do
  fill fs $kb; try gpt-ckpt export -q a.safetensors --llmc fs/m.bin; leftovers fs
done
