#!/usr/bin/env bash
# Every model's tiny CUDA runs (bench/cuda_sanitize.py) under compute-sanitizer
# memcheck and racecheck; one line per model and tool, logs in $OUT.
#   PYTHONPATH=<built package> bash bench/cuda_sanitize.sh [models] [tools]
set -uo pipefail
OUT=${OUT:-out/gpu}; mkdir -p "$OUT"
models=${1:-"fd dipolar magnet mbloch dec"}
tools=${2:-"memcheck racecheck"}
limit=${SANITIZE_LIMIT:-120}
for m in $models; do
  for tool in $tools; do
    log="$OUT/sanitize-$m-$tool.log"
    start=$(date +%s)
    timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      python3 bench/cuda_sanitize.py --model "$m" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    echo "$m $tool rc=$rc $(( $(date +%s) - start ))s ${summary:-no summary (see $log)}"
  done
done
