# fault_mem.bash: helpers of the fault_mem tests (sourced).
# timed CMD...: runs it; prints its exit status and how many lines of stderr, then those lines
# (the device line left out) with the sizes masked. (No timing: a refusal before any work is
# shown by its one line and by nothing written, not by a clock.)
timed() {
  local rc
  "$@" > out.txt 2> err.txt; rc=$?
  echo "exit $rc ($(wc -l < err.txt) line)"
  grep -v '^gpt-[a-z]*: device' err.txt | numbers
}
# numbers: sizes and the machine's own limit left out
numbers() { sed -E 's/[0-9]+\.[0-9] (kB|MB|GB|TB)/X \1/g; s/\((MemAvailable|cgroup memory limit)\)/(MemAvailable or cgroup)/'; }
