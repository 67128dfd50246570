# SIGTERM, SIGINT or SIGHUP while writing -o FILE: no FILE.tmp.XXXXXX is left behind and the tool
# dies of the signal. A run killed outright (SIGKILL) leaves one: the next run to the same output
# removes it (and only it).
source "$TOP/tests/cli/lib.bash"; need_data
set -m # job control: background jobs keep SIGINT (else bash starts them with it ignored)
mkfifo in
for sig in TERM INT HUP KILL; do
  gpt-tokenize -q in -o x.bin --val-fraction 0.1 --val-output v.bin & pid=$!
  exec 3> in
  cat "$DATA/tinyshakespeare/input.txt" >&3
  for i in $(seq 100); do ls x.bin.tmp.* v.bin.tmp.* > /dev/null 2>&1 && break; sleep 0.05; done
  echo "$sig: $(ls | grep -c '\.tmp\.') temps while running"
  kill -s $sig $pid
  rc=0; wait $pid || rc=$?
  exec 3>&-
  echo "$sig: exit $rc ($(kill -l $rc)), $(ls | grep -c '\.tmp\.') left, $(ls | grep -c '^[xv].bin$') outputs"
done
touch x.bin.tmp.keep other.bin.tmp.Ab12cD
gpt-tokenize -q "$DATA/tinyshakespeare/input.txt" -o x.bin --val-fraction 0.1 --val-output v.bin
ls | grep '\.tmp\.'
test -s x.bin && test -s v.bin && echo "x.bin and v.bin written"
