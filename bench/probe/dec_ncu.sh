#!/usr/bin/env bash
# Memory traffic, occupancy and stall reasons of the DEC leapfrog kernel (ncu):
#   GRID=bcc BLOCKS=189 DTYPE=complex128 bash bench/probe/dec_ncu.sh
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p /tmp/g "$OUT"
[ -f /tmp/nlsepy-pkg/nlsepy/_cuda*.so ] || OUT=/tmp/g bash bench/gpu.sh --no-bench --no-tests > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
m="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct"
m="$m,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active"
m="$m,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors.sum,smsp__inst_executed.sum"
m="$m,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_active"
for r in long_scoreboard short_scoreboard lg_throttle mio_throttle barrier wait not_selected math_pipe_throttle tex_throttle; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for g in ${GRIDS:-bcc}; do
  timeout 200 "$NCU" --clock-control none -k "regex:k_apply|k_march" --launch-skip 4 --launch-count 1 --metrics "$m" \
    python3 bench/probe/dec_profile.py $g ${BLOCKS:-189} ${DTYPE:-complex128} 10 2>&1 |
    grep -E "k_apply|ms/step|__|launch" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//'
done
