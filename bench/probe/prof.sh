#!/usr/bin/env bash
# profile the tensor-core kernel (float) with Nsight Compute; rates of mma shapes
set -uo pipefail
OUT=${OUT:-out/gpu}
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
nvcc -O3 -arch=sm_90 bench/probe/mma_rate.cu -o /tmp/mma_rate && /tmp/mma_rate | tee "$OUT/mma_rate.txt"
for p in 1 2 3; do
  echo "pipe $p"; (cd bench && NLSEPY_MBLOCH_PIPE=$p python3 mbloch.py --backends cuda --dtypes float32,float64 --z-steps 30 \
    --numpy-z-steps 0 2>&1 | grep -E "^cuda")
done | tee "$OUT/pipes.txt"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for p in 1 3; do
  NLSEPY_MBLOCH_PIPE=$p timeout 200 "$NCU" --clock-control none -k regex:k_atoms_tc --launch-skip 3 --launch-count 1 --set full \
    -o "$OUT/prof$p" python3 bench/probe/mbloch_prof.py > "$OUT/ncu$p.log" 2>&1
  "$NCU" -i "$OUT/prof$p.ncu-rep" --page details > "$OUT/details$p.txt" 2>&1
  "$NCU" -i "$OUT/prof$p.ncu-rep" --page source --print-source sass --csv > "$OUT/sass$p.csv" 2>&1
  tail -3 "$OUT/ncu$p.log"; ls -la "$OUT"
done
rm -f "$OUT"/*.ncu-rep
grep -E "Duration|Issue Slots Busy|Eligible Warps|No Eligible|Registers Per|Achieved Occupancy|Executed Ipc A" "$OUT/details1.txt" "$OUT/details3.txt"
