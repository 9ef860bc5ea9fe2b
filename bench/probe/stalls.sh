#!/usr/bin/env bash
# stall reasons of a float tensor-core kernel (KERNEL: k_atoms_tcf, k_atoms_wg, k_atoms_tc) in a pipelined launch (ncu)
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p /tmp/g
OUT=/tmp/g bash bench/gpu.sh --no-bench --no-tests > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
m=""
for r in barrier short_scoreboard long_scoreboard wait math_pipe_throttle mio_throttle dispatch_stall not_selected \
  selected lg_throttle no_instruction branch_resolving membar sleeping tex_throttle drain misc; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for skip in ${SKIPS:-0 2}; do
  timeout 200 "$NCU" --clock-control none -k regex:${KERNEL:-k_atoms_tcf} --launch-skip $skip --launch-count 1 \
    --metrics "launch__grid_size,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum${m}" \
    python3 bench/probe/mbloch_prof.py 2>&1 | grep -E "launch__grid|smsp__|sm__|l1tex|gpu__time" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
done
