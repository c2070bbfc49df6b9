#!/usr/bin/env bash
# One GPU call for work written without a GPU (2026-12-06: the tensor-core GEMV for 2-16 rows, the
# dequantize routing, the Hopper flash prefill in the library): build an sm_90 wheel (background)
# while the microbenches run (each checks its kernels against a reference), then the CUDA tests of
# the touched families, then bench rows as the deadline allows. Output: a few text files under
# $OUT (the device returns about 8). Usage: BUDGET=seconds OUT=dir bash scripts/h200_pending.sh
# (carry .whl; WHEEL=path: a braze wheel built elsewhere, carried, instead of the build). MICRO: the microbenches (names below), TESTS: the test files, K: a pytest -k filter, FULL: families benched with --full (attention), OPLIM: seconds an op's bench rows may take (90), OPS: family:op bench
# rows. PHASE=bench skips to the bench rows on a warm machine whose /tmp/site holds the wheel.
# A wheel for the device's Python 3.12 builds here too (device time saved: the build takes ~180 s there):
#   python3.12 -m venv /tmp/v312 && /tmp/v312/bin/pip install scikit-build-core nanobind cmake ninja numpy
#   CMAKE_ARGS=-DBRAZE_CUDA_ARCHS=90 /tmp/v312/bin/python -m pip wheel --no-build-isolation --no-deps \
#     -C build-dir=/tmp/sk312 -w .bwhl .     (first build ~25 min on 2 cores, then ~1 min a changed .cu)
# (python3.12: ~/.pyenv/versions/3.12.1/bin/python3.12 on this machine), then WHEEL=$PWD/.bwhl/braze-*.whl, carry .bwhl.
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
repo=$PWD
T0=$(date +%s); DEADLINE=$((T0 + ${BUDGET:-560}))
left() { local l=$((DEADLINE - $(date +%s))); [ $l -lt 5 ] && l=5; [ $l -gt $1 ] && l=$1; echo $l; }
export PYTHONPATH=/tmp/site
M=$O/micro.txt
if [ "${PHASE:-all}" != bench ]; then
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $O/log.txt
if [ -n "${WHEEL:-}" ]; then  # a braze wheel built elsewhere for this device (carried): no build here
  (mkdir -p /tmp/whl && cp $WHEEL /tmp/whl/ && echo "build rc 0: carried $WHEEL" > $O/build.log) &
else
(CMAKE_ARGS="-DBRAZE_CUDA_ARCHS=90" CMAKE_BUILD_PARALLEL_LEVEL=12 timeout 420 python3 -m pip wheel --no-build-isolation --no-deps -w /tmp/whl . > $O/build.log 2>&1; echo "build rc $? at $(( $(date +%s) - T0 )) s" >> $O/build.log) &
fi
B=$!
NV="nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders -I scripts"
NVA="nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I csrc -I shaders -I scripts"
declare -A SRC=([attnw]="$NVA scripts/cuda_attn_wgmma.cu" [gemvmma]="$NV scripts/cuda_gemv_mma_bw.cu"
  [dqbw]="$NV -fmad=false scripts/cuda_dequant_bw.cu" [gemvbw]="$NV scripts/cuda_gemv_bw.cu"
  [smpbw]="$NV scripts/cuda_sample_bw.cu" [decbw]="$NV scripts/cuda_decode_bw.cu"
  [actbw]="$NV -fmad=false scripts/cuda_act_bw.cu")
declare -A LIM=([attnw]=60 [gemvmma]=100 [dqbw]=220 [gemvbw]=90 [smpbw]=90 [decbw]=90 [actbw]=40)
MICRO=${MICRO-attnw gemvmma dqbw}  # set but empty: none
for n in $MICRO; do ${SRC[$n]} -o /tmp/$n > $O/nvcc_$n.txt 2>&1 & done
wait $(jobs -p | grep -v "^$B$")
for n in $MICRO; do cat $O/nvcc_$n.txt >> $O/nvcc.txt; rm -f $O/nvcc_$n.txt; done
echo "microbench compiled at $(( $(date +%s) - T0 )) s" | tee -a $O/log.txt
for n in $MICRO; do
  echo "=== $n" >> $M
  timeout ${LIM[$n]} /tmp/$n >> $M 2>&1; echo "$n rc $?" | tee -a $O/log.txt
done
echo "microbench done at $(( $(date +%s) - T0 )) s" | tee -a $O/log.txt
wait $B; tail -1 $O/build.log | tee -a $O/log.txt
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site /tmp/whl/braze-*.whl || { tail -30 $O/build.log; exit 1; }
cd /tmp
TESTS=${TESTS:-test_attention test_quant_matmul_cuda test_quant_cuda test_cuda_variants test_quant}
timeout $(left 280) python3 -m pytest -q -rf -m cuda -n 12 -p no:cacheprovider $(for t in $TESTS; do echo $repo/tests/$t.py; done) \
  ${K:+-k "$K"} > $O/pytest.log 2>&1
echo "pytest rc $? at $(( $(date +%s) - T0 )) s: $(tail -1 $O/pytest.log)" | tee -a $O/log.txt
grep -E "FAILED|^ERROR" $O/pytest.log | head -20 | tee -a $O/log.txt
cd $repo
fi
# bench rows: attention prefill beside torch SDPA, quant.matmul GEMV rows, dequantize per format, W8A8
OPS=${OPS-attention:prefill quant:matmul_q4_0 quant:matmul_q4_K quant:matmul_w8a8_fp8_e4m3 quant:matmul_w8a8_int8}  # set but empty: none
for fo in $OPS; do
  fam=${fo%%:*}; op=${fo#*:}; l=$(left ${OPLIM:-90}); [ $l -le 15 ] && break
  full=(); case " ${FULL:-attention} " in *" $fam "*) full=(--full);; esac
  timeout $l python3 -m braze bench --backend cuda --no-progress --json $O/bench_${op}.json --family $fam --op $op \
    --peers torch "${full[@]}" >> $O/bench.txt 2>&1 || echo "bench $fo rc $?" | tee -a $O/log.txt
done
echo "done at $(( $(date +%s) - T0 )) s" | tee -a $O/log.txt
