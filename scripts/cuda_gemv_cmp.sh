#!/usr/bin/env bash
# The CUDA GEMV of two commits side by side (scripts/cuda_gemv_bw.cu built
# against each one's headers): times, and whether every library output is the
# same bit for bit. The older headers come in .old/ (ignored; carry it):
#   rm -rf .old && mkdir .old && git archive REV csrc shaders | tar -x -C .old
# Usage: OUT=dir bash scripts/cuda_gemv_cmp.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O" /tmp/d_old /tmp/d_new
NV="nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I scripts"
$NV -I .old/csrc -I .old/shaders scripts/cuda_gemv_bw.cu -o /tmp/gold > "$O/nvcc.txt" 2>&1 &
$NV -I csrc -I shaders scripts/cuda_gemv_bw.cu -o /tmp/gnew >> "$O/nvcc.txt" 2>&1 &
wait
GEMVBW_DUMP=/tmp/d_old timeout 120 /tmp/gold > "$O/old.txt" 2>&1
GEMVBW_DUMP=/tmp/d_new timeout 120 /tmp/gnew > "$O/new.txt" 2>&1
for f in /tmp/d_old/*; do
  cmp -s "$f" "/tmp/d_new/$(basename "$f")" && echo "same $(basename "$f")" || echo "DIFF $(basename "$f")"
done > "$O/cmp.txt"
echo "$(grep -c same "$O/cmp.txt") outputs the same, $(grep -c DIFF "$O/cmp.txt") differ"
