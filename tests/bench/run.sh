#!/usr/bin/env bash
# make bench: speed measured side by side with the reference implementations on this machine.
# Tokenizer: gpt-tokenize (1 thread, all threads) vs tiktoken (Python package, 1 thread) on
# Tiny Shakespeare and on a ~50 MB mixed corpus built from text found on this machine.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
vocab="$data/gpt2"
work="$build/bench"; mkdir -p "$work"
python3 -c 'import tiktoken' 2>/dev/null || { echo "bench: installing tiktoken (pip) for the reference run" >&2;
  pip install -q tiktoken >&2 || true; }

corpus="$work/mixed.txt"
if [ ! -s "$corpus" ]; then  # ~50 MB: C headers, Python sources, docs, tokenizer cases (non-ASCII)
  { find /usr/include -name '*.h' | sort | head -n 3000 | xargs cat
    find /usr/lib/python3* "$(python3 -c 'import os; print(os.path.dirname(os.__file__))')" \
      /usr/local/cuda/include -name '*.py' -o -name '*.h' 2>/dev/null | sort | head -n 8000 | xargs cat
    find /usr/share/doc -name 'copyright' | sort | xargs cat
    for i in $(seq 40); do cat "$data"/tokenizer-cases/*.txt; done
    cat "$data/tinyshakespeare/input.txt"
  } 2>/dev/null | head -c 50000000 > "$corpus" || true
fi

secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
best_of3() { local b=999 t; for _ in 1 2 3; do t=$(secs "$@"); b=$(echo "if ($t < $b) $t else $b" | bc -l); done; echo "$b"; }

printf '%-14s %10s %14s %14s %14s %8s %8s\n' text MB tiktoken-MB/s ours-1t-MB/s ours-all-MB/s ratio-1t scaling
for text in "$data/tinyshakespeare/input.txt" "$corpus"; do
  bytes=$(wc -c < "$text")
  read -r tt_rate _ < <(python3 "$top/tests/bench/tokenize_tiktoken.py" "$vocab" "$text" "$work/tt.ids")
  startup=$(best_of3 gpt-tokenize -q -j1 -V "$vocab" /dev/null -o "$work/empty.bin")
  t1=$(best_of3 gpt-tokenize -q -j1 -V "$vocab" "$text" -o "$work/ours.bin")
  tn=$(best_of3 gpt-tokenize -q -V "$vocab" "$text" -o "$work/ours.bin")
  # same ids as tiktoken (ours adds the document token in front)
  if ! cmp -s <(od -An -v -tu2 -j1026 "$work/ours.bin" | tr -s ' \n' '\n\n' | sed '/^$/d') \
              <(od -An -v -tu4 "$work/tt.ids" | tr -s ' \n' '\n\n' | sed '/^$/d'); then
    echo "bench: WARNING: ids differ from tiktoken on $text" >&2
  fi
  r1=$(echo "$bytes / ($t1 - $startup) / 1000000" | bc -l)
  rn=$(echo "$bytes / ($tn - $startup) / 1000000" | bc -l)
  printf '%-14s %10.1f %14.1f %14.1f %14.1f %7.2fx %7.2fx\n' "$(basename "$text")" "$(echo "$bytes/1000000" | bc -l)" \
    "$tt_rate" "$r1" "$rn" "$(echo "$r1 / $tt_rate" | bc -l)" "$(echo "$rn / $r1" | bc -l)"
done
echo "(ours: encoding throughput, vocabulary load of $(printf '%.0f' "$(echo "$startup*1000" | bc -l)") ms excluded; $(nproc) cores)"
