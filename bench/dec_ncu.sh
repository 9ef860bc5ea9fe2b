#!/usr/bin/env bash
# Nsight Compute on one leapfrog launch of the CUDA DEC kernel (k_apply, k_apply_w
# or k_march, whichever the grid takes) per grid and
# precision (the problem of bench/dec.py at BLOCKS^3 BCC-equivalent
# unknowns): DRAM bytes, duration, occupancy and the warps' stall reasons,
# as text in $OUT/ncu-<grid>-<dtype>.txt (ncu locks the clocks to base, so
# its durations are longer than bench/dec.py's).
#   OUT=/some/dir bash bench/dec_ncu.sh [GRIDS] [DTYPES] [BLOCKS]
# e.g. bash bench/dec_ncu.sh cubic,fcc,bcc complex64,complex128 189
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/dec-ncu || exit 1
grids=${1:-cubic,fcc,bcc}
dtypes=${2:-complex64,complex128}
blocks=${3:-189}
command -v ncu >/dev/null || { echo "ncu (Nsight Compute) is not on PATH"; exit 1; }
for g in ${grids//,/ }; do
  for d in ${dtypes//,/ }; do
    echo "== $g $d" | tee -a "$OUT/summary.txt"
    timeout 300 ncu --kernel-name "regex:k_apply|k_march" --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section WarpStateStats --section SchedulerStats \
      "$PY" bench/dec.py --grids "$g" --dtypes "$d" --blocks "$blocks" --cpu-threads= \
      --steps 3 --repeats 1 > "$OUT/ncu-$g-$d.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Stall|Issued Warp" \
      "$OUT/ncu-$g-$d.txt" | head -20 | tee -a "$OUT/summary.txt"
  done
done
