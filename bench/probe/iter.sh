#!/usr/bin/env bash
# one call on the GPU machine: build, the Maxwell-Bloch CUDA tests, the
# float benchmark over pipeline depths and an ncu summary of the float
# tensor-core kernel (one z step a launch), into $OUT/ncu.txt
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p /tmp/g
OUT=/tmp/g bash bench/gpu.sh --no-bench --tests "${TESTS:-tests/test_mbloch_cuda.py -q -x}" 2>&1 | tail -15
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
(cd bench && python3 mbloch.py --backends cuda --dtypes float32 --numpy-z-steps 0 2>&1 | grep -E "^cuda|fraction" -A3 | tail -4)
for p in ${PIPES:-1 2}; do
  echo "pipe $p"; (cd bench && NLSEPY_MB_PIPE=$p python3 mbloch.py --backends cuda --dtypes float32 --z-steps 30 \
    --numpy-z-steps 0 2>&1 | grep -E "^cuda")
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
NLSEPY_MB_PIPE=1 timeout 240 "$NCU" --clock-control none -k regex:k_atoms_tcf --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --section LaunchStats --section Occupancy --metrics smsp__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio \
  python3 bench/probe/mb_prof.py > "$OUT/ncu.txt" 2>&1
grep -E "Duration|Issue Slots Busy|Executed Ipc A|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |hmma|stalled" "$OUT/ncu.txt"
