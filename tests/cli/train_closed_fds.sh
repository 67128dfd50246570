# gpt-train started with stdout or stderr closed (as daemons and some schedulers start jobs):
# metrics.jsonl must not land on fd 1 or 2 and receive the log; every line stays one JSON object.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
json_lines() { python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]; print(sys.argv[1], "is JSON lines:", len(open(sys.argv[1]).readlines()), "lines")' "$1"; }
gpt-train "${TINY[@]}" --max_iters=6 --eval_interval=3 --sample_tokens=4 --out_dir=o1 >&-
json_lines o1/metrics.jsonl
gpt-train "${TINY[@]}" --max_iters=6 --eval_interval=3 --sample_tokens=4 --out_dir=o2 2>&- > log2.txt
json_lines o2/metrics.jsonl
grep -c '^step [0-9]*/6' log2.txt
