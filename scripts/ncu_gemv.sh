#!/usr/bin/env bash
# Nsight Compute's view of the CUDA GEMV (one row of x, 4096 x 14336), built from
# scripts/cuda_gemv_bw.cu: for each case (default bf16 q4_0 q8_0) the library's
# gemv_kernel (the 4th launch: steady state) with --set full, and its stall
# reasons per issued instruction; for q4_0 also the per-instruction source page
# (SASS with executions and stall samples: where the instructions go) and the int8-x variant q8x.
# Usage: OUT=dir bash scripts/ncu_gemv.sh [cases...]
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -lineinfo -I csrc -I shaders -I scripts \
  scripts/cuda_gemv_bw.cu -o /tmp/gemvbw || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
one=(--clock-control none -k regex:gemv_kernel --launch-skip 3 --launch-count 1)
m=smsp__inst_executed.sum,smsp__cycles_active.avg
for s in long_scoreboard barrier lg_throttle mio_throttle short_scoreboard wait math_pipe_throttle no_instruction \
  not_selected selected dispatch_stall branch_resolving; do
  m=$m,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
for c in ${@:-bf16 q4_0 q8_0}; do
  GEMVBW_ONLY=$c timeout 150 "$ncu" "${one[@]}" --set full /tmp/gemvbw > "$O/ncu_$c.txt" 2>&1 || echo "ncu $c rc $?"
  GEMVBW_ONLY=$c timeout 100 "$ncu" "${one[@]}" --metrics "$m" /tmp/gemvbw > "$O/stall_$c.txt" 2>&1 || echo "stall $c rc $?"
done
GEMVBW_ONLY=q4_0 timeout 150 "$ncu" "${one[@]}" --set full --import-source yes --page source --print-source sass \
  /tmp/gemvbw > "$O/src_q4_0.txt" 2>&1 || echo "source q4_0 rc $?"
# the int8-x variant (q8x) of q4_0: --set full and its stalls
GEMVBW_ONLY=q4_0 timeout 150 "$ncu" --clock-control none -k regex:gemv_q8x --launch-skip 3 --launch-count 1 --set full \
  /tmp/gemvbw > "$O/ncu_q4_0_q8x.txt" 2>&1 || echo "ncu q8x rc $?"
GEMVBW_ONLY=q4_0 timeout 100 "$ncu" --clock-control none -k regex:gemv_q8x --launch-skip 3 --launch-count 1 \
  --metrics "$m" /tmp/gemvbw > "$O/stall_q4_0_q8x.txt" 2>&1 || echo "stall q8x rc $?"
ls -la "$O"
