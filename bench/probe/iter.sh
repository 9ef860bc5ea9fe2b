#!/usr/bin/env bash
# one call on the GPU machine: build, the Maxwell-Bloch CUDA tests, the
# float benchmark over pipeline depths, the SASS mix and an ncu summary of
# the float tensor-core kernel.  Everything into $OUT/all.log, sass.txt, ncu.txt
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
obj=$(find build-gpu -name "mbloch.cu.o" | head -1)
cuobjdump -sass -fun '_Z11k_atoms_tcfILi2EEv4MBTc6MBPipePK7double2PK6float2PKfS9_S9_PKdPS2_PdSF_' "$obj" > /tmp/f.sass 2>&1 ||
  cuobjdump -sass "$obj" > /tmp/f.sass
python3 - <<'PY' > "$OUT/sass.txt"
import re, collections
txt = open('/tmp/f.sass').read()
ops = collections.Counter(m.group(1).split('.')[0] for m in re.finditer(r'/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)', txt))
print(sum(ops.values()), ops.most_common(60))
PY
grep -m3 -B2 -A6 "F2FP\|TF32\|FRND" /tmp/f.sass | head -40 >> "$OUT/sass.txt"
cp /tmp/f.sass "$OUT/f.sass"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
NLSEPY_MB_PIPE=1 timeout 240 "$NCU" --clock-control none -k regex:k_atoms_tcf --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --section LaunchStats --section Occupancy --metrics smsp__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio \
  python3 bench/probe/mb_prof.py > "$OUT/ncu.txt" 2>&1
grep -E "Duration|Issue Slots Busy|Executed Ipc A|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |hmma|stalled" "$OUT/ncu.txt"
