# disk_full.bash: helpers for the disk_full_* cases, sourced after lib.bash. The script runs again
# in a mount namespace of its own (unshare -m), so the small tmpfs it mounts goes with it whatever
# happens; where mounting is not allowed (not root, no namespaces) the case is skipped.
if [ -z "${DISK_FULL_NS:-}" ]; then
  unshare -m true 2> /dev/null || { echo "cannot make a mount namespace (unshare -m): not root?" >&2; exit 77; }
  DISK_FULL_NS=1 exec unshare -m bash "$0"
fi

# small_fs DIR KB [INODES]: a fresh tmpfs of KB kilobytes (and at most INODES files) on DIR.
small_fs() {
  mkdir -p "$1"; umount "$1" 2> /dev/null || true
  mount -t tmpfs -o "size=${2}k${3:+,nr_inodes=$3}" tmpfs "$1" ||
    { echo "cannot mount a tmpfs on $1" >&2; exit 77; }
}
# fill DIR FREE_KB: a filler file that leaves FREE_KB kilobytes free on DIR's file system.
fill() {
  rm -f "$1/filler"
  local free; free=$(df -k --output=avail "$1" | tail -n 1)
  [ "$free" -le "$2" ] || head -c $(( (free - $2) * 1024 )) /dev/zero > "$1/filler"
}
# try CMD...: runs it, then "exit N: <its stderr>" (each line of it).
try() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt)"; }
# leftovers DIR: "in DIR:" and the names in it (the filler left out).
leftovers() { echo "in $1:" $(ls -A "$1" | grep -vx filler || true); }
