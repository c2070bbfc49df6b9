#!/usr/bin/env bash
# braze bench --e2e on a GPU machine beside llama.cpp built there with CUDA.
# Nothing can be downloaded there, so the llama-cpp-python sdist travels with the
# tree, stripped to about 9 MB (here: pip download --no-deps --no-binary :all:
# llama-cpp-python==0.3.36, unpack, delete .git, vendor/llama.cpp/{.git,models,
# docs,benches,tests,examples,media,tools/server} and the sycl / vulkan / opencl /
# cann / hexagon backends, keep vendor/miniaudio: the vendor CMakeLists adds it;
# tar czf into LCP). llama_cpp imports diskcache, which the device lacks: carry its wheel in
# .whl/ (pip download --no-deps diskcache -d .whl) with the others. Two steps so that each fits a 10-minute call:
#   LCP=_dev/lcp.tgz bash scripts/h200_e2e.sh build   # braze (sm_90) and llama.cpp (CUDA, sm_90) side by side, ~520 s on 16 cores
#   (without LCP braze alone, ~230 s; then `PEERS=none ... run`)
#   OUT=dir bash scripts/h200_e2e.sh run              # the 1b random model, e2e benches, CUDA tests, sanitizer (~5 min)
# The llama.cpp peer runs in a process of its own that imports neither torch nor
# braze: in the bench's process (after torch) its CUDA build crashed loading a model.
set -u
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$PWD; O=${OUT:-gpu-out}; mkdir -p "$O"
case "${1:-}" in
build)
  ls .whl/*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  t0=$(date +%s); jobs=16
  if [ -n "${LCP:-}" ]; then  # LCP unset: braze alone (the e2e rows then need --peers none: PEERS=none run)
    mkdir -p /tmp/lcp && tar xzf "$LCP" -C /tmp/lcp
    ( cd /tmp/lcp/llama_cpp_python-* && CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90-real -DLLAVA_BUILD=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL=10 python3 -m pip wheel --no-build-isolation --no-deps -w /tmp/lw . > /tmp/llama_build.log 2>&1
      echo "llama rc $? $(( $(date +%s) - t0 )) s" > /tmp/llama_done ) &
    jobs=8
  fi
  if ! ls .whl/braze-*.whl >/dev/null 2>&1; then  # a carried braze wheel (scripts/h200.sh's) is used as is
    CMAKE_ARGS="-DBRAZE_CUDA_ARCHS=90" CMAKE_BUILD_PARALLEL_LEVEL=$jobs python3 -m pip wheel --no-build-isolation --no-deps \
      -Cbuild-dir=/tmp/bw -w /tmp/w . > /tmp/build.log 2>&1 || tail -30 /tmp/build.log
    echo "braze build $(( $(date +%s) - t0 )) s"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/w/braze-*.whl
  fi
  wait
  if [ -n "${LCP:-}" ]; then
    cat /tmp/llama_done
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/lw/llama_cpp_python-*.whl
  fi ;;
run)  # most wanted first: a cut run keeps the e2e rows, then the sanitizer
  cd /tmp
  timeout 150 python3 -m braze.bench.gguf_random /tmp/m1b.gguf --shape 1b 2>/dev/null
  # the graph step and the eager one, each beside llama.cpp in the same call
  for g in --cuda-graph ""; do
    timeout 150 python3 -m braze bench --e2e /tmp/m1b.gguf --backend cuda --dtype bfloat16 --prompt-tokens 512 \
      --decode-tokens 64 $g ${PEERS:+--peers $PEERS} --json "$O/e2e_cuda_bfloat16${g:+_graph}.json"
  done
  # the fast GEMV dot (every M) under compute-sanitizer's memcheck
  command -v compute-sanitizer >/dev/null && timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool memcheck \
    --target-processes all python3 -m pytest -q -m cuda -p no:cacheprovider "$R/tests/test_quant_matmul_cuda.py" \
    -k fast_dot > "$O/sanitizer_gemv.log" 2>&1
  echo "sanitizer rc $?: $(grep -E 'ERROR SUMMARY|passed|failed' "$O/sanitizer_gemv.log" | tail -2)"
  timeout 200 python3 -m pytest -q -m cuda -n 8 -p no:cacheprovider "$R/tests/test_gguf_decode.py" \
    "$R/tests/test_quant_matmul_cuda.py" -rf > "$O/pytest_cuda.log" 2>&1
  echo "pytest -m cuda rc $?: $(tail -1 "$O/pytest_cuda.log")" ;;
*) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
