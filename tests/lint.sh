#!/bin/bash
# lint.sh: source checks for `make lint` (run from the repository root).
#
# Measurements stay out of comments (issue 39): a comment line of a C/C++/CUDA source outside
# tests/ (a line whose first non-blank characters are //, /* or *) fails when it holds a measured
# time or rate, a number with a unit (ms, us, µs, ns, GB/s, MB/s, TB/s, GFLOP/s, TFLOP/s,
# tokens/s, tok/s), together with a machine name (Zen, EPYC, Ryzen, Xeon, Cascade Lake, H100,
# H200, A100, RTX, "this machine") or a date (2026-11-27, or 11-27 alone; a range before a unit
# or %, "10-25 GB/s", is not a date), on that line or on the comment line just before it. Such
# figures go in tests/bench/cpu-results.md or gpu-results.md with their date and machine; the
# comment keeps the reason and points there. Sizes, limits and settings ("a 300 ms timeout") have
# no machine or date and pass. Prints FILE:LINE: TEXT for each offending line, exits 1 if any.
#
# Lines stay within 100 columns: a line of a C/C++/CUDA source, tests/ included, fails when it
# holds more than 100 characters (characters, not bytes: "µs" is two). Prints FILE:LINE: N
# columns for each offending line, exits 1 if any.
#
# With arguments, checks those files instead (to try the rules).
set -u
cd "$(dirname "$0")/.." || exit 2

# The sources to check, NUL-separated: the arguments, if any; else the C/C++/CUDA files git
# knows of (in a tarball: those on disk), tests/ among them only when $1 is "tests".
sources() {
    local tests=$1
    shift
    if [ $# -gt 0 ]; then printf '%s\0' "$@"; return; fi
    if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then # a tarball: the sources on disk
        find common kernels tokenize train sample evalppl ckpt ${tests:+tests} -type f \
            \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' -o -name '*.cc' \) -print0
        return
    fi
    git ls-files -coz --exclude-standard '*.c' '*.h' '*.cu' '*.cpp' '*.cc' |
        { if [ -n "$tests" ]; then cat; else grep -zv '^tests/'; fi } |
        while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
}

bad=0
# shellcheck disable=SC2016 # the awk programs are in single quotes on purpose
sources "" "$@" |
    xargs -0 -r awk '
    BEGIN {
        units = "(ms|us|µs|ns|GB/s|MB/s|TB/s|GFLOP/s|TFLOP/s|tokens/s|tok/s)"
        rate = "[0-9] ?" units "([^A-Za-z0-9_/]|$)"
        machine = "(^|[^A-Za-z0-9_])(Zen|EPYC|Ryzen|Xeon|Cascade Lake|H100|H200|A100|RTX|[Tt]his machine)([^A-Za-z0-9_]|$)"
        date = "(^|[^0-9-])(20[0-9][0-9]-)?(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])([^0-9-]|$)"
        range = "[0-9]+-[0-9]+ ?(" units "|%)"
        bad = 0
    }
    function where(s) { gsub(range, "", s); return s ~ machine || s ~ date }
    FNR == 1 { prev = "" }
    !/^[ \t]*(\/\/|\/\*|\*)/ { prev = ""; next }
    {
        # the figure and its machine or date on this comment line, or split over it and the last
        if (($0 ~ rate && (where($0) || where(prev))) || (prev ~ rate && where($0))) {
            print FILENAME ":" FNR ": measured figure in a comment: " $0
            bad = 1
        }
        prev = $0
    }
    END { exit bad }' || { echo "lint: move measured figures to tests/bench/*-results.md (rule: tests/lint.sh)" >&2; bad=1; }

# The column limit, tests/ included. Characters are counted as the bytes that do not continue a
# UTF-8 sequence (0x80-0xBF), in the C locale: any awk (mawk counts bytes whatever the locale).
# shellcheck disable=SC2016
sources tests "$@" |
    LC_ALL=C xargs -0 -r awk '
    { s = $0; n = length(s) - gsub(/[\200-\277]/, "", s) }
    n > 100 { print FILENAME ":" FNR ": " n " columns (limit 100)"; bad = 1 }
    END { exit bad }' ||
    { echo "lint: break the lines over 100 columns, in the file's style (rule: tests/lint.sh)" >&2; bad=1; }
exit $bad
