#!/usr/bin/env bash
# Throughput of one deployment across processes against the same layout in one process (cpu
# backend, this host): `generate` of the same requests, once in one process and once as N ranks
# under mpirun, side by side with the ratio. A benchmark, not a test.
# Usage: tools/bench_multiprocess.sh [BUILD_DIR] [RANKS] [REQUESTS] [TOKENS_EACH]
set -euo pipefail
build=${1:-build}
ranks=${2:-3}
requests=${3:-16}
tokens=${4:-400}
bin=$(realpath "$build/bin/switchyard")
layout=$(realpath "$(dirname "$0")/../layouts/disaggregated-2a4e.toml")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" make-model --arch mixtral --preset tiny --seed 1 --out model >/dev/null
for ((i = 0; i < requests; i++)); do
  echo "{\"id\": \"r$i\", \"tokens\": [$((i + 1)), $((i + 2)), $((i + 3))], \"max_new_tokens\": $tokens}"
done > prompts.jsonl
cores=$(nproc)
export OMP_WAIT_POLICY=PASSIVE OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(generate --model model --layout "$layout" --prompts prompts.jsonl --ignore-eos)
per_rank=$(( cores / ranks > 0 ? cores / ranks : 1 ))

seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
one=$(seconds "$bin" --threads "$cores" "${args[@]}" --out one.jsonl)
many=$(seconds mpirun --oversubscribe -np "$ranks" "$bin" --threads "$per_rank" "${args[@]}" --out many.jsonl)
cmp -s one.jsonl many.jsonl && same=identical || same=DIFFERENT
total=$((requests * tokens))
printf '%s, %d requests x %d tokens, %d cores (model load and start-up included)\n' \
  "$(basename "$layout")" "$requests" "$tokens" "$cores"
printf '%-34s %10s %12s\n' "run" "seconds" "tokens/s"
printf '%-34s %10.2f %12.0f\n' "one process (--threads $cores)" "$one" "$(echo "$total / $one" | bc -l)"
printf '%-34s %10.2f %12.0f\n' "$ranks ranks, mpirun (--threads $per_rank each)" "$many" "$(echo "$total / $many" | bc -l)"
printf 'cross-process / one-process tokens/s: %.2f; tokens %s\n' "$(echo "$one / $many" | bc -l)" "$same"
