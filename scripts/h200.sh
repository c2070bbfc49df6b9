#!/usr/bin/env bash
# The GPU run behind docs/performance.md: build braze with CUDA, run the CUDA
# tests, then `braze bench --backend cuda`. Run from the repository root on a
# machine with an NVIDIA GPU; logs and JSON go to $1 (default ./gpu-out).
# Peers missing there (Liger, array-api-compat) may be given as wheels in .whl/.
set -uo pipefail
out=${1:-gpu-out}
fam=${2:-norm rope sampling}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
t0=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install --no-build-isolation --no-deps -v . > "$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
cd /tmp  # import the installed package, not the source tree
python3 -m braze info | tee "$out/info.txt"
repo=$OLDPWD
python3 -m pytest -q -m cuda -x "$repo/tests" -p no:cacheprovider 2>&1 | tee "$out/pytest_cuda.log" | tail -15
for f in $fam; do
  python3 -m braze bench --backend cuda --family "$f" --full --no-progress --json "$out/bench_${f}_cuda.json" \
    2>&1 | tee "$out/bench_${f}_cuda.txt"
done
