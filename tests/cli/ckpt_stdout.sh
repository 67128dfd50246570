# gpt-ckpt with stdout on a full disk (/dev/full): every output path (info as text and JSON,
# --help of the tool and of a subcommand, --version) exits 1 with one line saying so.
source "$TOP/tests/cli/lib.bash"
[ -w /dev/full ] || { echo "no /dev/full" >&2; exit 77; }
set +e
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors
for args in "info a.safetensors" "info --json --stats a.safetensors" "--help" "info --help" \
            "convert --version" "--version"; do
  gpt-ckpt $args > /dev/full 2> err; echo "$args: exit $?, $(wc -l < err) line: $(cat err)"
done
