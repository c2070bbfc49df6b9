#!/usr/bin/env bash
# One H100 / H200 run for the Hopper flash prefill in the library
# (flash_tc90.cuh behind braze.attention.prefill, docs/cuda.md): the standalone
# microbench first (its checks include ragged batches; a hang there exits 3 on
# its watchdog instead of stalling pytest), then the build, the CUDA prefill
# tests on the default (wgmma) path, the BRAZE_CUDA_ATTN=mma variant, and
# `braze bench` of prefill on both paths. Logs and JSON go to $1 (default ./gpu-out).
#
# Wheels in .whl/ are installed first (a braze wheel among them is used as is,
# else braze is built here for sm_90), as in scripts/h200.sh.
# Knobs: SKIP_MICRO=1, SKIP_TESTS=1.
set -uo pipefail
out=$(realpath -m "${1:-gpu-out}")
mkdir -p "$out"
repo=$PWD
export PYTHONPATH=/tmp/site
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
if [ "${SKIP_MICRO:-0}" != 1 ]; then
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I csrc -I shaders -I scripts \
    scripts/cuda_attn_wgmma.cu -o /tmp/attnw > "$out/micro_build.log" 2>&1 || { tail -20 "$out/micro_build.log"; exit 1; }
  timeout 300 /tmp/attnw > "$out/micro.txt" 2>&1
  echo "microbench: rc $? (0 all checks good, 1 bad values, 2 CUDA error, 3 hang)"
  grep -E "bad [1-9]|^time|total bad|hang|watchdog" "$out/micro.txt"
fi
if ! ls .whl/braze-*.whl >/dev/null 2>&1; then
  t0=$(date +%s)
  CMAKE_ARGS="-DBRAZE_CUDA_ARCHS=90" CMAKE_BUILD_PARALLEL_LEVEL=16 \
    python3 -m pip wheel --no-build-isolation --no-deps -w "$out" -v . > "$out/build.log" 2>&1 \
    || { tail -40 "$out/build.log"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$out"/braze-*.whl || exit 1
  echo "build: $(( $(date +%s) - t0 )) s"
fi
cd /tmp  # import the installed package, not the source tree
python3 -m braze info || exit 1
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  t0=$(date +%s)
  timeout 600 python3 -m pytest -q -m cuda -p no:cacheprovider "$repo/tests/test_attention.py" -k prefill \
    > "$out/pytest_prefill.log" 2>&1
  echo "pytest -m cuda -k prefill (wgmma default): rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest_prefill.log")"
  grep -E "^FAILED|^ERROR" "$out/pytest_prefill.log" | head -20
  t0=$(date +%s)
  timeout 900 python3 -m pytest -q -m cuda -p no:cacheprovider "$repo/tests/test_cuda_variants.py" \
    -k "attn or prefill" > "$out/pytest_variants.log" 2>&1
  echo "pytest variants (BRAZE_CUDA_ATTN=mma, bad setting): rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest_variants.log")"
  grep -E "^FAILED|^ERROR" "$out/pytest_variants.log" | head -20
fi
for attn in wgmma mma; do
  t0=$(date +%s)
  BRAZE_CUDA_ATTN=$attn timeout 300 python3 -m braze bench --backend cuda --family attention --op prefill --full \
    --no-progress --json "$out/bench_prefill_$attn.json" > "$out/bench_prefill_$attn.txt" 2>&1 \
    || echo "bench $attn failed: $?"
  echo "bench prefill ($attn): $(( $(date +%s) - t0 )) s"
  cat "$out/bench_prefill_$attn.txt"
done
