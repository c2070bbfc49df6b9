#!/usr/bin/env bash
# The microbenches of branch pending-gpu alone (no library build): each checks its variants against
# the kernel it replaces and times them. Usage: BUDGET=seconds OUT=dir bash scripts/h200_micro.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
T0=$(date +%s); DEADLINE=$((T0 + ${BUDGET:-240}))
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $O/gpu.txt
NV="nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders"
G="nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I csrc -I shaders -I scripts scripts/cuda_gemm_wgmma.cu -o /tmp/gemmw"
($G -lcublas > $O/nvcc_gemm.txt 2>&1 || $G >> $O/nvcc_gemm.txt 2>&1) & P0=$!
$NV scripts/cuda_hadamard_bw.cu -o /tmp/hadbw > $O/nvcc_had.txt 2>&1 & P1=$!
$NV -fmad=false scripts/cuda_act_bw.cu -o /tmp/actbw > $O/nvcc_act.txt 2>&1 & P2=$!
$NV -fmad=false scripts/cuda_dequant_bw.cu -o /tmp/dqbw > $O/nvcc_dq.txt 2>&1 & P3=$!
$NV scripts/cuda_gemv_bw.cu -o /tmp/gemvbw > $O/nvcc_gemv.txt 2>&1 & P4=$!
$NV scripts/cuda_decode_bw.cu -o /tmp/decbw > $O/nvcc_dec.txt 2>&1 & P5=$!
$NV scripts/cuda_sample_bw.cu -o /tmp/smpbw > $O/nvcc_smp.txt 2>&1 & P6=$!
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I csrc -I shaders -I scripts scripts/cuda_attn_wgmma.cu -o /tmp/attnw > $O/nvcc_attn.txt 2>&1 & P7=$!
wait $P0; echo "gemm compiled at $(( $(date +%s) - T0 )) s"
timeout 40 /tmp/gemmw > $O/gemm.txt 2>&1; echo "gemm rc $?"; cat $O/gemm.txt
wait $P7; timeout 60 /tmp/attnw > $O/attn.txt 2>&1; echo "attn rc $?"
wait $P1 $P2 $P3 $P4 $P5 $P6; echo "all compiled at $(( $(date +%s) - T0 )) s"
for b in had:30 act:30 dequant:45 gemv:60 decode:45 sample:45; do
  n=${b%%:*}; t=${b#*:}; l=$((DEADLINE - $(date +%s))); [ $l -lt 10 ] && { echo "skip $n"; continue; }
  [ $l -lt $t ] && t=$l
  case $n in had) x=/tmp/hadbw;; act) x=/tmp/actbw;; dequant) x=/tmp/dqbw;; gemv) x=/tmp/gemvbw;; decode) x=/tmp/decbw;; sample) x=/tmp/smpbw;; esac
  timeout $t $x > $O/$n.txt 2>&1; echo "$n rc $? at $(( $(date +%s) - T0 )) s"
done
