#!/usr/bin/env bash
# make bench: speed measured side by side with the reference implementations on this machine.
# Ceilings (BENCH=ceil, and before the training and sampling parts): a machine line (CPU model,
# the instruction-set path the CPU backend's dispatcher picks, the CPU's own vector features,
# cores), OpenBLAS's sgemm rate and the memory read bandwidth on the rows' 2 threads
# (tests/bench/ceilings.c, membw.c). Each training and sampling row is given as a ratio to the
# reference run beside it and to its ceiling: training, the step's flops (nanoGPT's 6N + 12 L H
# Q T per token) per second as a share of the sgemm rate; sampling, tokens/s as a share of the
# bound read bandwidth / bytes of weights and KV cache read per token. The machine is usually
# shared: quote these ratios, not times (tests/bench/cpu-results.md keeps them per CPU kind).
# Tokenizer: gpt-tokenize (1 thread, all threads) vs tiktoken (Python package, 1 thread) on
# Tiny Shakespeare and on a ~50 MB mixed corpus built from text found on this machine.
# Training: median ms per step (forward + backward + AdamW), 2 threads, configs S and M, beside
# the same model in PyTorch, Debian's (OpenBLAS) and PyPI's (MKL), each at its best thread
# setting, in turn for 3 rounds; the ratio is to the fastest (torch_refs). OpenBLAS is left free
# to use its best kernels (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for these commands only).
# Sampling: gpt-sample tokens/s on GPT-2 124M with random weights (rand_ckpt.c), batch 1,
# 16-token prompt, 256 new tokens, 2 threads, fp32, bf16, fp16 and int8 (Q8_0) weights, as a
# fraction of the bandwidth bound (bytes of weights and KV cache read per token / read
# bandwidth); the read bandwidth is measured right beside each row (membw.c on the rows' 2
# threads, 512 MB, best of 9 passes, before and after it: the row's bound uses the better of the
# two) and the spread of those measurements is printed; beside nanoGPT-style generation in torch (torch_sample.py,
# no KV cache); and gpt-evalppl tokens/s on 124M over 4096 tokens of a BPE shard of Tiny
# Shakespeare, and its HellaSwag items/s beside llm.c's scoring in torch (torch_hellaswag.py).
# Shared CPUs: train_step S alone, then two at once on the same cores; each one's median step
# time as a ratio to alone (a fair share of the cores is about 2x; target: within 2.5x), with
# gptkit's bounded spin and with libgomp's default spin (GOMP_SPINCOUNT=300000) side by side.
# Data parallel and checkpoints: tests/bench/dist.sh (1 vs 2 ranks, the cost of a checkpoint).
# Object storage: tests/bench/s3.sh (data streamed from a local S3 server against local files, a
# checkpointing step with the bucket as out_dir against a plain step; skipped without moto).
# Parquet to shards: a FineWeb-shaped file made from the corpus (about 200 MB of text, zstd, row
# groups of 1000 documents): gpt-tokenize -j 2 beside pyarrow + tiktoken in 2 worker processes
# (as llm.c's fineweb.py and nanochat prepare data; tests/bench/parquet_tiktoken.py), end to end
# time and peak memory, the tokens compared (target: 4x faster, a quarter of the memory).
# llama.cpp beside gpt-sample (BENCH=llamacpp only, not in the default run: it downloads and builds
# llama.cpp, about 10 minutes the first time): tests/bench/llamacpp.sh.
# ZeRO's stages side by side on 2 CPU ranks, speed and each rank's peak memory (BENCH=zero only:
# tests/bench/zero.sh); tensor parallel beside data parallel and one process (BENCH=tp only:
# tests/bench/tp.sh); gpt-tokenize --learn beside tokenizers' and rustbpe's trainers (BENCH=learn
# only: tests/bench/learn.sh).
# BENCH=ceil, BENCH=tokenize, BENCH=parquet, BENCH=train, BENCH=sample, BENCH=shared, BENCH=dist,
# BENCH=zero, BENCH=tp, BENCH=learn, BENCH=s3 or BENCH=llamacpp runs one part.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
vocab="$data/gpt2"
work="$build/bench"; mkdir -p "$work"

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

# ceilings: the machine line and the sgemm and bandwidth ceilings, measured once a run
sgemm_gfs='' read_gbs=''
threads=2 membw_mb=512  # the rows' thread count; a buffer 16x a 32 MB LLC
# membw_read: the read bandwidth now, GB/s, on the rows' threads, best of 9 passes
membw_read() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=$threads "$build/bench/membw" $threads $membw_mb 9 |
  sed -n 's/read GB\/s \([0-9.]*\).*/\1/p'; }
ceilings() {
  [ -n "$sgemm_gfs" ] && return 0
  local line bw model flags f feats=''
  line=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/bench/ceilings" $threads)
  bw=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=$threads "$build/bench/membw" $threads $membw_mb 9)
  sgemm_gfs=$(echo "$line" | sed -n 's/.*sgemm GFLOP\/s \([0-9.]*\).*/\1/p')
  read_gbs=$(echo "$bw" | sed -n 's/read GB\/s \([0-9.]*\).*/\1/p')
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
  flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1) "
  for f in avx2 fma f16c avx512f avx512_bf16 avx512_vnni avx_vnni amx_tile; do
    [[ "$flags" == *" $f "* ]] && feats+=" $f"
  done
  echo
  echo "machine: ${model:-unknown CPU} (family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
    "model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(nproc) cores;" \
    "dispatcher: $(echo "$line" | sed -n 's/^isa \([a-z0-9]*\).*/\1/p'); features:${feats:- none}"
  printf 'ceilings: sgemm %.1f GFLOP/s (OpenBLAS, %s threads, square n = %s); memory read %.1f GB/s, copy %s GB/s' \
    "$sgemm_gfs" $threads "$(echo "$line" | sed -n 's/.* n \([0-9]*\).*/\1/p')" "$read_gbs" \
    "$(echo "$bw" | sed -n 's/.*copy GB\/s \([0-9.]*\).*/\1/p')"
  printf ' (%s threads, %s MB, best of 9 passes; read median %s, worst %s)\n' $threads $membw_mb \
    "$(echo "$bw" | sed -n 's/.*read-median \([0-9.]*\).*/\1/p')" "$(echo "$bw" | sed -n 's/.*read-min \([0-9.]*\).*/\1/p')"
}

secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
best_of3() { local b=999 t; for _ in 1 2 3; do t=$(secs "$@"); b=$(echo "if ($t < $b) $t else $b" | bc -l); done; echo "$b"; }

tokenize_bench() {
python3 -c 'import tiktoken' 2>/dev/null || { echo "bench: installing tiktoken (pip) for the reference run" >&2;
  pip install -q tiktoken >&2 || true; }
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
}

parquet_bench() {
  python3 -c 'import tiktoken, pyarrow' 2>/dev/null || { echo "bench: installing tiktoken and pyarrow (pip) for the reference run" >&2;
    pip install -q tiktoken pyarrow >&2 || true; }
  local pq="$work/fineweb_like.parquet" ref ours_s ours_kb
  [ -s "$pq" ] || python3 "$top/tests/bench/parquet_tiktoken.py" make "$corpus" "$pq" 200 >/dev/null
  read -r ref_s ref_n ref_mb < <(python3 "$top/tests/bench/parquet_tiktoken.py" run "$vocab" "$pq" "$work/pq_ref.bin" 2)
  read -r ours_s ours_kb < <({ /usr/bin/time -f '%e %M' gpt-tokenize -q -j 2 -V "$vocab" "$pq" -o "$work/pq_ours.bin"; } 2>&1 | tail -n 1)
  cmp -s <(tail -c +1025 "$work/pq_ours.bin") "$work/pq_ref.bin" || echo "bench: WARNING: Parquet tokens differ from tiktoken's" >&2
  echo
  printf '%-22s %10s %12s %12s %8s %12s %12s %8s\n' parquet file-MB ref-s ours-s speedup ref-MB ours-MB memory
  printf '%-22s %10.1f %12.2f %12.2f %7.2fx %12.0f %12.0f %7.2fx\n' "$(basename "$pq")" \
    "$(echo "$(wc -c < "$pq")/1000000" | bc -l)" "$ref_s" "$ours_s" "$(echo "$ref_s / $ours_s" | bc -l)" \
    "$ref_mb" "$(echo "$ours_kb/1024" | bc -l)" "$(echo "$ref_mb * 1024 / $ours_kb" | bc -l)"
  echo "(ref: pyarrow + tiktoken, 2 worker processes; ours: gpt-tokenize -j 2; $ref_n tokens; $(nproc) cores)"
}

# The PyTorch references of the training rows, "label python OMP_WAIT_POLICY" a line: Debian's
# (python3-torch, OpenBLAS; installed if missing) with passive waiting (by default its OpenMP
# threads spin against OpenBLAS's own: 2.5x slower, measured), and PyPI's (MKL; pip into
# BUILD/bench/torch-pypi the first time, about 3 GB with its CUDA wheels) with its defaults. Each
# runs at its best setting; a training row's ratio is to the fastest of them.
torch_refs() {
  /usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "bench: installing python3-torch for the reference run" >&2;
    apt-get install -y -qq python3-torch >/dev/null 2>&1; }
  /usr/bin/python3 -c 'import torch' 2>/dev/null && echo "debian /usr/bin/python3 PASSIVE"
  local venv="$work/torch-pypi"
  if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "bench: installing PyPI's torch into $venv for the reference run (about 3 GB)" >&2
    { /usr/bin/python3 -m venv "$venv" || { apt-get install -y -qq python3-venv && /usr/bin/python3 -m venv "$venv"; }; } >/dev/null 2>&1
    "$venv/bin/pip" install -q torch numpy >/dev/null 2>&1 || echo "bench: pip install torch failed: no PyPI row" >&2
  fi
  "$venv/bin/python" -c 'import torch' 2>/dev/null && echo "pypi $venv/bin/python default"
}

# median of the numbers on stdin
median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

train_bench() {
  local refs rounds=3
  refs=$(torch_refs)
  ceilings
  echo
  printf '%-8s %14s %14s %8s %8s   %s\n' config gptkit-ms torch-ms ratio sgemm "each reference (median ms)"
  for cfg in S M; do
    # gptkit and each reference in turn, $rounds rounds (this machine's speed moves by phases)
    local r ours ours_ms=() label py policy t
    declare -A tms=()
    for r in $(seq $rounds); do
      ours=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/bench/train_step" $cfg)
      ours_ms+=("$(echo "$ours" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')")
      while read -r label py policy; do
        [ -n "$label" ] || continue
        t=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $([ "$policy" = default ] || echo OMP_WAIT_POLICY=$policy) \
          "$py" "$top/tests/bench/torch_step.py" $cfg 2>/dev/null | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
        tms[$label]+="${t:-nan} "
      done <<< "$refs"
    done
    local mine rss tokens fpt pct torch_ms=nan ratio=nan each='' m
    mine=$(printf '%s\n' "${ours_ms[@]}" | median)
    rss=$(echo "$ours" | sed -n 's/.*peak RSS \([0-9]*\) MB.*/\1/p')
    # the step's flops per second (flops/token x tokens/step / step time) as a share of the sgemm rate
    tokens=$(echo "$ours" | sed -n 's/.*B=\([0-9]*\) T=\([0-9]*\),.*/\1 * \2/p')
    fpt=$(echo "$ours" | sed -n 's/.*estimate: \([0-9.e+]*\) flops\/token.*/\1/p' | sed 's/e+*/*10^/')
    pct=$(echo "100 * $tokens * $fpt / ($mine / 1000) / ($sgemm_gfs * 10^9)" | bc -l)
    for label in "${!tms[@]}"; do
      m=$(echo "${tms[$label]}" | tr ' ' '\n' | grep -v '^nan$' | grep . | median)
      [ -n "$m" ] || continue
      each+="$label $m, "
      { [ "$torch_ms" = nan ] || (( $(echo "$m < $torch_ms" | bc -l) )); } && torch_ms=$m
    done
    [ "$torch_ms" = nan ] || ratio=$(echo "$mine / $torch_ms" | bc -l)
    printf '%-8s %14.1f %14.1f %7.2fx %7.0f%%   (%s; gptkit peak RSS %s MB)\n' $cfg "$mine" "$torch_ms" "$ratio" \
      "$pct" "${each%, }" "$rss"
    unset tms
  done
  echo "(S: 4 layers, 128 wide, vocab 65, B=12, T=64; M: GPT-2 124M, B=4, T=64; 2 threads; medians of $rounds rounds,"
  echo " gptkit and each torch in turn; ratio: gptkit's step time / the fastest torch's, < 1: gptkit faster;"
  echo " sgemm: 6N + 12 L H Q T flops per token at gptkit's step time, % of the sgemm ceiling)"
  # what gpt-train's recompute costs and saves on the CPU: config S, whose activations are most
  # of its memory, each setting against false in turn
  local rc line act0 ms0
  printf '\n%-16s %10s %8s %16s\n' recompute ms/step ratio activations
  for rc in false gelu gelu+ln; do
    line=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/bench/train_step" --recompute $rc S)
    local ms act
    ms=$(echo "$line" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    act=$(echo "$line" | sed -n 's/.*in order): .* \([0-9.]*\) *$/\1/p')
    [ $rc = false ] && act0=$act ms0=$ms
    printf '%-16s %10.1f %7.2fx %12s MiB   (%.0f%% of false'"'"'s)\n' "$rc" "$ms" "$(echo "$ms / $ms0" | bc -l)" \
      "$act" "$(echo "100 * $act / $act0" | bc -l)"
  done
}

sample_bench() {
  local nobl="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2"
  local model="$work/gpt2-124M-random.safetensors" L=12 C=768 Vp=50304 P=16 N=256
  [ -s "$model" ] || "$build/bench/rand_ckpt" "$model"
  ceilings
  echo
  # bytes read per token: the weight matrices (4 per layer + the tied lm_head over padded rows)
  # and the KV cache (fp32 k and v of every layer, at the mean context length P + N/2)
  local mats=$(( L * 12 * C * C + Vp * C )) kv=$(( 4 * 2 * C * L * (P + N / 2) ))
  # a prompt of 16 BPE tokens
  local prompt="First Citizen: Before we proceed any further, hear me speak. All: Speak"
  local torch_tps=''  # the reference first: each row is given as a ratio to it
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    torch_tps=$($nobl OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$top/tests/bench/torch_sample.py" $N 2 $P |
      sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p')
  fi
  printf '%-22s %10s %14s %10s %8s\n' sampler tokens/s MB/token bound vs-torch
  # the read bandwidth right beside each row, on the rows' threads (best of 9 passes each time)
  local bws=() bw_prev bw_next
  bw_prev=$(membw_read)
  bws+=("$bw_prev")
  for dt in fp32 bf16 fp16 int8; do
    local wb=4; [ $dt != fp32 ] && wb=2
    local bytes=$(( wb * mats + kv )); [ $dt = int8 ] && bytes=$(( 34 * mats / 32 + kv ))
    local line; line=$($nobl gpt-sample --device cpu -m "$model" -V "$vocab" --dtype $dt -p "$prompt" -n $N -t 0 --ids 2>&1 >/dev/null | tail -n 1)
    bw_next=$(membw_read)
    bws+=("$bw_next")
    local bw; bw=$(echo "if ($bw_prev > $bw_next) $bw_prev else $bw_next" | bc -l)
    local np; np=$(echo "$line" | sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p')
    local tps; tps=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p')
    local vs=nan; [ -n "$torch_tps" ] && vs=$(echo "$tps / $torch_tps" | bc -l)
    printf '%-22s %10.1f %14.1f %9.0f%% %7.1fx   (prompt %s tokens; bound %.1f tokens/s at %.1f GB/s)\n' "gptkit $dt" "$tps" \
      "$(echo "$bytes / 1000000" | bc -l)" "$(echo "100 * $tps * $bytes / ($bw * 1000000000)" | bc -l)" \
      "$vs" "$np" "$(echo "$bw * 1000000000 / $bytes" | bc -l)" "$bw"
    bw_prev=$bw_next
  done
  [ -n "$torch_tps" ] && printf '%-22s %10.1f   (nanoGPT generate: no KV cache, top-k 200)\n' "torch fp32" "$torch_tps"
  echo "(batch 1, $P-token prompt, $N new tokens, $threads threads, GPT-2 124M random weights; bound: % of read bandwidth /"
  echo " bytes per token, the bandwidth the better of the two measured just before and just after the row;"
  echo " vs-torch: tokens/s / torch fp32's)"
  printf 'memory read beside the rows (%s threads, %s MB, best of 9 passes each): %s GB/s; spread %.0f%%\n' \
    $threads "$membw_mb" "${bws[*]}" "$(printf '%s\n' "${bws[@]}" | sort -g | sed -n '1p;$p' | paste -sd' ' |
      awk '{ print 100 * ($2 - $1) / $2 }')"
  # gpt-evalppl: 4096 tokens of a BPE shard (header-less copy, --raw), windows of 1024
  local shard="$work/shakespeare-bpe.bin"
  [ -s "$shard" ] || gpt-tokenize -q -V "$vocab" "$data/tinyshakespeare/input.txt" -o "$shard"
  head -c $((1024 + 8192)) "$shard" | tail -c 8192 > "$work/eval4k.raw"
  printf '%-22s %10s\n' evalppl tokens/s
  for dt in fp32 bf16 fp16 int8; do
    local line; line=$($nobl gpt-evalppl --device cpu -m "$model" --dtype $dt --raw --context 1024 "$work/eval4k.raw" 2>&1 >/dev/null | tail -n 1)
    printf '%-22s %10.0f\n' "gptkit $dt" "$(echo "$line" | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p')"
  done
  hellaswag_bench
}

# HellaSwag scoring (gpt-evalppl --hellaswag) on 124M random weights, 32 items shaped like
# HellaSwag's (a ~60-token context, 4 endings of ~25 tokens, from Tiny Shakespeare), fp32, 2
# threads: rows packed 4 (one item) and 16 a forward, beside llm.c's way in torch.
hellaswag_bench() {
  local items="$work/hellaswag32.jsonl"
  python3 "$top/tests/bench/hellaswag_items.py" "$data/tinyshakespeare/input.txt" 32 > "$items"
  printf '%-22s %10s\n' hellaswag items/s
  for rows in 4 16; do
    local line; line=$($nobl gpt-evalppl --device cpu -m "$model" -V "$vocab" --hellaswag --batch $rows "$items" 2>&1 >/dev/null | tail -n 1)
    local n s; n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) items in \([0-9.]*\) s.*/\1/p'); s=$(echo "$line" | sed -n 's/.* items in \([0-9.]*\) s.*/\1/p')
    printf '%-22s %10.2f   (%s rows a forward)\n' "gptkit fp32" "$(echo "$n / $s" | bc -l)" $rows
  done
  if /usr/bin/python3 -c 'import torch' 2>/dev/null && ! /usr/bin/python3 -c 'import tiktoken' 2>/dev/null; then
    echo "bench: installing tiktoken (pip) for Debian's python3, for the reference run" >&2
    /usr/bin/python3 -m pip install -q --break-system-packages tiktoken >&2 || true
  fi
  if /usr/bin/python3 -c 'import torch, tiktoken' 2>/dev/null; then
    local t; t=$($nobl OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$top/tests/bench/torch_hellaswag.py" "$vocab" "$items" 2)
    printf '%-22s %10.2f   (llm.c dev/data/hellaswag.py: an item a forward)\n' "torch fp32" \
      "$(echo "$t" | sed -n 's/.*(\([0-9.]*\) items\/s).*/\1/p')"
  fi
}

shared_bench() {
  local med='s/.*median \([0-9.]*\) ms.*/\1/p' a b c
  echo
  printf '%-24s %10s %12s %12s %8s %8s\n' "two at once" alone-ms first-ms second-ms first second
  for spin in gptkit 300000; do
    local run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
    [ $spin = gptkit ] || run+=(GOMP_SPINCOUNT=$spin)
    a=$("${run[@]}" "$build/bench/train_step" S 40 | sed -n "$med")
    "${run[@]}" "$build/bench/train_step" S 40 > "$work/shared1.out" &
    "${run[@]}" "$build/bench/train_step" S 40 > "$work/shared2.out"
    wait
    b=$(sed -n "$med" "$work/shared1.out"); c=$(sed -n "$med" "$work/shared2.out")
    printf '%-24s %10.1f %12.1f %12.1f %7.2fx %7.2fx\n' \
      "$([ $spin = gptkit ] && echo "gptkit (spin bounded)" || echo "libgomp default spin")" \
      "$a" "$b" "$c" "$(echo "$b / $a" | bc -l)" "$(echo "$c / $a" | bc -l)"
  done
  echo "(train_step S, 2 threads each, $(nproc) cores; a fair share is about 2x, target within 2.5x)"
}

# tests/bench/s3.sh; without moto (its exit 77) one line says why
s3_bench() { local rc=0; bash "$top/tests/bench/s3.sh" "$build" || rc=$?
  [ $rc -eq 77 ] && echo "object storage: skipped (moto is not installed: pip install 'moto[server]')"
  [ $rc -eq 0 ] || [ $rc -eq 77 ]; }

case "${BENCH:-all}" in
  tokenize) tokenize_bench ;;
  parquet) parquet_bench ;;
  train) train_bench ;;
  sample) sample_bench ;;
  shared) shared_bench ;;
  ceil) ceilings ;;
  dist) bash "$top/tests/bench/dist.sh" "$build" ;;
  zero) bash "$top/tests/bench/zero.sh" "$build" ;;
  tp) bash "$top/tests/bench/tp.sh" "$build" ;;
  learn) bash "$top/tests/bench/learn.sh" "$build" ;;
  s3) s3_bench ;;
  llamacpp) bash "$top/tests/bench/llamacpp.sh" "$build" ;;
  *) tokenize_bench; parquet_bench; train_bench; shared_bench; sample_bench; bash "$top/tests/bench/dist.sh" "$build"
     s3_bench ;;
esac
