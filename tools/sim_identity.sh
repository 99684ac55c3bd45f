#!/usr/bin/env bash
# Records what the simulator reports on a fixed set of runs, so a speed change can be checked
# to leave every simulated result identical: run it with the old binary and the new one, then
# diff the two directories. Wall-time figures (the only ones allowed to move) are stripped.
#   tools/sim_identity.sh build/bin/switchyard /tmp/before
#   tools/sim_identity.sh build/bin/switchyard /tmp/after && diff -r /tmp/before /tmp/after
# Needs python3 (JSON, and the recording's SQLite tables).
set -euo pipefail
bin=$1
out=$2
mkdir -p "$out"
strip_json() { python3 -c 'import json,sys; d=json.load(sys.stdin)
def drop(x):
    if isinstance(x, dict):
        x.pop("speed_vs_real_time", None)
        for v in x.values(): drop(v)
    elif isinstance(x, list):
        for v in x: drop(v)
drop(d); print(json.dumps(d, indent=1, sort_keys=True))'; }
strip_text() { sed -E -e 's/\[[0-9.]+ s wall\]//' -e 's/in [0-9.]+ s wall \([0-9.]+× real time\)//'; }

mixtral=(--backend sim --model mixtral-8x7b --skew exp:0.5)
for p in sync pingpong async findep adaptive; do
  "$bin" bench "${mixtral[@]}" --layout disaggregated:4+4 --workload medium --rate 60 --duration 2 --policy $p --json |
    strip_json >"$out/bench-medium-$p.json"
done
for p in sync pingpong async; do
  "$bin" bench "${mixtral[@]}" --layout colocated:4 --workload short --rate 30 --duration 2 --policy $p --json |
    strip_json >"$out/bench-colocated-$p.json"
done
"$bin" bench --backend sim --model qwen3-235b-a22b --workload short --skew exp:0.5 --policy async \
  --layout disaggregated:16+16 --rate 120 --duration 0.2 --json | strip_json >"$out/bench-qwen-async.json"
for p in default async pingpong sync; do
  policy=()
  [ $p = default ] || policy=(--policy $p)
  "$bin" demo --pace 0 --duration 3 --no-telemetry "${policy[@]}" 2>&1 | strip_text >"$out/demo-$p.txt"
done
# With telemetry: the recorded spans and queue samples (the queue sampler reads the devices'
# queues mid-run), as row counts and a digest of the sorted rows.
rec=$(mktemp -d)
"$bin" demo --pace 0 --duration 1 --policy async --record "$rec/run.db" >/dev/null 2>&1
"$bin" trace export-spans "$rec/run.db" "$rec/spans.db" >/dev/null
python3 - "$rec/spans.db" >"$out/demo-recording.txt" <<'PY'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for table in ("SPANS", "QUEUE_SAMPLES"):
    rows = sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
    print(table, len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
PY
rm -rf "$rec"
