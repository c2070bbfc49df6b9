#!/usr/bin/env bash
# A short GPU call for the end of a session (about 300 s): the sm_90 wheel builds in the
# background while the GEMV microbench runs (q4_0, q8_0), then the matmul tests the session's
# changes touch. Usage: OUT=dir bash scripts/h100_final.sh (carry .whl). K: pytest -k expression.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; repo=$PWD; T0=$(date +%s)
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
(CMAKE_ARGS="-DBRAZE_CUDA_ARCHS=90" CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 330 python3 -m pip wheel --no-build-isolation \
  --no-deps -w /tmp/whl . > "$O/build.log" 2>&1; echo "build rc $? at $(( $(date +%s) - T0 )) s" >> "$O/build.log") &
B=$!
nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders -I scripts scripts/cuda_gemv_bw.cu \
  -o /tmp/gemvbw > "$O/nvcc.txt" 2>&1
for c in q4_0 q8_0; do GEMVBW_ONLY=$c timeout 60 /tmp/gemvbw >> "$O/micro.txt" 2>&1; done
echo "micro done at $(( $(date +%s) - T0 )) s" >> "$O/log.txt"
wait $B; tail -1 "$O/build.log" >> "$O/log.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site /tmp/whl/braze-*.whl || exit 1
cd /tmp && timeout 120 python3 -m pytest -q -rf -m cuda -n 8 -p no:cacheprovider "$repo/tests/test_quant_matmul_cuda.py" \
  "$repo/tests/test_cuda_variants.py" -k "${K:-gemv or matmul_rows or fast_dot}" > "$O/pytest.log" 2>&1
echo "pytest rc $? at $(( $(date +%s) - T0 )) s: $(tail -1 "$O/pytest.log")" >> "$O/log.txt"
cat "$O/log.txt"
