#!/usr/bin/env bash
# Nsight Compute metrics and stall reasons of one k_rows launch (the lean
# rows) for each grid/dtype/order named, the problem of bench/dec.py at 189^3
# BCC-equivalent unknowns, clocks not locked.
#   OUT=dir bash bench/probe/dec_rows_ncu.sh "a15:complex64:own a15:complex64:delta"
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/rows-ncu || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
m="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed"
m="$m,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct"
m="$m,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
m="$m,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_bank_conflicts_pipe_lsu.sum"
m="$m,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex.sum,dram__bytes_read.sum,dram__bytes_write.sum"
m="$m,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active"
m="$m,l1tex__lsu_writeback_active.avg.pct_of_peak_sustained_active,l1tex__f_wavefronts.sum,l1tex__m_xbar2l1tex_read_sectors.sum"
m="$m,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_requests_srcunit_tex.sum,sm__cycles_elapsed.avg.per_second"
for r in barrier short_scoreboard long_scoreboard wait math_pipe_throttle mio_throttle dispatch_stall not_selected \
  selected lg_throttle no_instruction branch_resolving membar sleeping tex_throttle drain misc; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for spec in $1; do
  IFS=: read -r g d o <<< "$spec"
  echo "== $g $d $o ${NLSEPY_DEC_KERNEL:-default}" | tee -a "$OUT/ncu.txt"
  (cd bench && timeout 300 "$NCU" --clock-control none -k regex:k_rows --launch-skip 4 --launch-count 1 \
    --metrics "$m" "$PY" probe/dec_order_probe.py --grids "$g" --dtypes "$d" --only "$o" \
    --steps 8 --time 0 2>&1) | grep -E "^    [a-z]" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' \
    | tee -a "$OUT/ncu.txt"
done
