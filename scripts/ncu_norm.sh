#!/usr/bin/env bash
# ncu metrics of the norm kernels beside an elementwise copy: time, DRAM
# bytes, occupancy and the main stall reasons. $1: out dir; more args go to
# profile_norm.py (the ops to launch).
set -uo pipefail
out=${1:-ncu-out}; mkdir -p "$out"
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active
m=$m,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic
m=$m,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps
for s in long_scoreboard barrier lg_throttle mio_throttle short_scoreboard drain membar wait math_pipe_throttle no_instruction; do
  m=$m,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
timeout 120 "$ncu" --clock-control none --metrics "$m" -k regex:'norm_kernel|vectorized_elementwise' \
  python3 "$(dirname "$0")/profile_norm.py" "${@:2}" > "$out/ncu_norm.txt" 2>&1 || echo "ncu rc $?"
python3 "$(dirname "$0")/ncu_table.py" "$out/ncu_norm.txt"
