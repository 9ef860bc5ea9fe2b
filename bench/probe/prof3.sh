#!/usr/bin/env bash
# ncu of a pipelined launch (several z slices) of the float tensor-core kernel
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p /tmp/g
OUT=/tmp/g bash bench/gpu.sh --no-bench --no-tests > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
timeout 300 "$NCU" --clock-control none -k regex:k_atoms_tcf --launch-skip ${SKIP:-2} --launch-count 1 --set full \
  python3 bench/probe/mb_prof.py > "$OUT/ncu3.txt" 2>&1
grep -E "Grid Size|Duration|Issue Slots Busy|Executed Ipc A|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |L1/TEX Cache|Shared|shared|pipeline|Mem Pipes|Stall|stall" "$OUT/ncu3.txt" | cut -c1-160 | head -60
