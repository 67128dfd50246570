# Crash consistency (issue 11): gpt-train killed with SIGKILL at random moments, with a checkpoint
# at every step (eval_interval=1) so that many kills land in a checkpoint write. After each kill:
# latest.safetensors, when present, is a symlink to a ckpt_ file present that loads and holds
# the step of its name; out_dir holds gpt-train's own names and temporaries only; the temporaries
# a kill left are gone once the next run got as far as a checkpoint. Every 10th trial a normal
# run continues one step past latest and leaves no temporary behind (the first time beside names
# like gpt-train's temporaries that are not its own, which it keeps). The sleeps come from a
# seeded $RANDOM; where the kills land depends on timing, so only summaries are printed.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
RANDOM=11
train=(gpt-train "${TINY[@]}" --eval_interval=1 --keep_last=2 --out_dir=o --init_from=auto)
trial=0 temps_seen=0 temps_removed=0 continued=0 kills_after_ckpt=0

fail() { echo "trial $trial: $*"; ls -l o >&2 || true; exit 1; }

# check_dir: the checks after a kill; sets step (latest's, else -1), newest (the newest ckpt_
# file's step, else 0: latest is missing after a kill between the first checkpoint's rename and
# latest's) and temps (the temporaries).
check_dir() {
  step=-1 newest=0 temps=()
  [ -d o ] || return 0
  local f t
  for f in $(ls -A o); do
    if [[ $f =~ ^(ckpt_[0-9]{8}\.safetensors|loss\.svg)\.tmp\.[A-Za-z0-9]{6}$ ||
          $f =~ ^latest\.safetensors\.tmp\.[0-9]+$ ]]; then
      temps+=("$f")
    elif [[ $f =~ ^ckpt_([0-9]{8})\.safetensors$ ]]; then
      newest=$((10#${BASH_REMATCH[1]} > newest ? 10#${BASH_REMATCH[1]} : newest))
    elif ! [[ $f =~ ^(ckpt_[0-9]{8}\.safetensors|latest\.safetensors|metrics\.jsonl|loss\.svg|gpt-train\.lock)$ ]]; then
      fail "unexpected file in out_dir: $f"
    fi
  done
  [ -e o/latest.safetensors ] || [ -L o/latest.safetensors ] || return 0
  [ -L o/latest.safetensors ] || fail "latest.safetensors is not a symlink"
  t=$(readlink o/latest.safetensors)
  [[ $t =~ ^ckpt_([0-9]{8})\.safetensors$ ]] || fail "latest.safetensors -> $t: not a checkpoint"
  [ -f "o/$t" ] || fail "latest.safetensors -> $t, which is missing"
  step=$((10#${BASH_REMATCH[1]}))
  gpt-ckpt info --stats o/latest.safetensors > info.txt 2>&1 || fail "latest does not load: $(cat info.txt)"
  grep -q "^training: *step $step," info.txt || fail "latest -> $t holds another step: $(grep training info.txt)"
}

# gone NAMES...: none of the files is in out_dir any more.
gone() { local f; for f in "$@"; do [ ! -e "o/$f" ] && [ ! -L "o/$f" ] || return 1; done; }

prev_step=-1 prev_temps=()
for trial in $(seq 1 60); do
  "${train[@]}" -q --max_iters=1000000 > /dev/null 2> run.err &
  pid=$!
  sleep "0.$(printf %03d $((RANDOM % 300)))"
  kill -9 $pid 2> /dev/null || true
  rc=0; wait $pid 2> /dev/null || rc=$?
  [ $rc -eq 137 ] || fail "gpt-train ended by itself (exit $rc): $(tail -n 3 run.err)"
  check_dir
  temps_seen=$((temps_seen + ${#temps[@]}))
  if [ $step -gt $prev_step ] && [ ${#prev_temps[@]} -gt 0 ]; then # this run wrote a checkpoint
    gone "${prev_temps[@]}" || fail "stale temporaries ${prev_temps[*]} still there after a checkpoint"
    temps_removed=$((temps_removed + ${#prev_temps[@]}))
  fi
  [ $step -ge 0 ] && kills_after_ckpt=$((kills_after_ckpt + 1))
  [ $step -ge $prev_step ] || fail "latest went back from step $prev_step to $step"
  prev_step=$step prev_temps=("${temps[@]}")
  if (( trial % 10 == 0 )); then
    from=$((step < 0 ? newest : step)) want=$((step < 0 ? newest + 1 : step + 1))
    if [ $trial -eq 10 ]; then # names like gpt-train's temporaries that are not its to remove
      decoys=(ckpt_00000001.safetensors.tmp.toolong1 latest.safetensors.tmp.99 mine.tmp.Ab3dE9
              loss.svg.tmp.Live01)
      mkdir -p o; touch o/ckpt_00000001.safetensors.tmp.toolong1 o/latest.safetensors.tmp.99 o/mine.tmp.Ab3dE9
      (exec 9> o/loss.svg.tmp.Live01; flock 9; exec sleep 60) & holder=$! # a live writer's (flock'd)
      for _ in $(seq 100); do [ -e o/loss.svg.tmp.Live01 ] && break; sleep 0.01; done
    fi
    "${train[@]}" --max_iters=$want > cont.out 2> cont.err || fail "continuing: $(tail -n 3 cont.err)"
    if [ $trial -eq 10 ]; then
      for f in "${decoys[@]}"; do [ -e "o/$f" ] || fail "$f removed"; done
      kill $holder; wait $holder 2> /dev/null || true
      rm "${decoys[@]/#/o/}"
    fi
    [ $from -eq 0 ] || grep -q "from o/.*at step $from\$" cont.err || fail "did not continue from step $from: $(cat cont.err)"
    check_dir
    [ $step -eq $want ] || fail "after continuing latest is at step $step, not $want"
    [ ${#temps[@]} -eq 0 ] || fail "temporaries left after a normal run: ${temps[*]}"
    if [ ${#prev_temps[@]} -gt 0 ]; then
      grep -q "removed o/.*(a temporary file left by a run that was killed)" cont.err ||
        fail "stale temporaries removed without saying so"
      temps_removed=$((temps_removed + ${#prev_temps[@]}))
    fi
    continued=$((continued + 1)) prev_step=$step prev_temps=()
  fi
done

echo "stderr: $temps_seen temporaries seen after a kill, $temps_removed seen removed, $kills_after_ckpt kills after a checkpoint" >&2
echo "$trial kills: latest always a complete checkpoint that loads, its step in its name, never behind"
echo "no file in out_dir but gpt-train's own names and temporaries"
[ $kills_after_ckpt -ge 40 ] && echo "at least 40 kills after a checkpoint had been written"
[ $temps_seen -gt 0 ] && [ $temps_removed -gt 0 ] && echo "stale temp files removed at start: yes"
echo "$continued normal runs continued from latest, one step further, no temporary left"
