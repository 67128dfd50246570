# lib.bash: helpers sourced by the CLI test scripts (run from a fresh temp dir by tests/run.sh).
# DATA is the shared test data, TOP the source tree, FIX the fixtures; PATH holds the tools.
set -euo pipefail

need_data() {
  [ -d "$DATA/gpt2" ] || { echo "shared test data not found at $DATA" >&2; exit 77; }
  export GPT_VOCAB="$DATA/gpt2"
}

# ids SHARD: the shard's tokens (after the 1024-byte header) on one line, space-separated.
ids() { od -An -v -tu2 -j1024 "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; echo; }
# ids32 SHARD: the same for uint32 shards.
ids32() { od -An -v -tu4 -j1024 "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; echo; }
# header_int SHARD I: the I-th int32 of the header.
header_int() { od -An -td4 -j$(( $2 * 4 )) -N4 "$1" | tr -d ' '; }
