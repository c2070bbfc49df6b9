#!/usr/bin/env bash
# The GPU run behind docs/performance.md: build braze with CUDA (sm_90 only,
# to save build time), run the CUDA tests, then `braze bench --backend cuda`
# for every family. Run from the repository root on a machine with an NVIDIA
# GPU; logs and one merged JSON go to $1 (default ./gpu-out). Peers missing
# there (Liger, array-api-compat) may be given as wheels in .whl/.
set -uo pipefail
out=$(realpath -m "${1:-gpu-out}")
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
t0=$(date +%s)
CMAKE_ARGS="-DBRAZE_CUDA_ARCHS=90" CMAKE_BUILD_PARALLEL_LEVEL=16 \
  python3 -m pip install --no-build-isolation --no-deps -v . > "$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
repo=$PWD
cd /tmp  # import the installed package, not the source tree
python3 -m braze info
t0=$(date +%s)
timeout 200 python3 -m pytest -q -m cuda -n 8 -p no:cacheprovider "$repo/tests" > "$out/pytest_cuda.log" 2>&1
echo "pytest -m cuda: rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest_cuda.log")"
grep -E "^FAILED" "$out/pytest_cuda.log" | head -20
b() { timeout 150 python3 -m braze bench --backend cuda --full --no-progress --json "$out/part_$1.json" "${@:2}" \
        >> "$out/bench_cuda.txt" 2>&1 || echo "bench $* failed: $?"; }
b 1 --family norm --op rms_norm
b 2 --family norm --op add_rms_norm
for op in layer_norm rms_norm_gated rms_norm_vjp layer_norm_vjp; do b "n_$op" --family norm --op "$op" --peers torch,liger; done
b 3 --family rope --op rope_qk
b 4 --family sampling --op softmax
b 5 --family sampling --op sample --peers torch
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
parts = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "part_*.json")))]
if parts:
    merged = {k: parts[0][k] for k in ("device", "backend", "commit")}
    merged["ceiling_gbs"] = [p["ceiling_gbs"] for p in parts]
    merged["rows"] = [dict(r, ceiling_gbs=p["ceiling_gbs"]) for p in parts for r in p["rows"]]
    merged["skipped"] = [s for p in parts for s in p.get("skipped", [])]
    json.dump(merged, open(os.path.join(out, "bench_cuda.json"), "w"), indent=1)
for p in glob.glob(os.path.join(out, "part_*.json")):
    os.remove(p)
PY
grep -E "braze|ceiling" "$out/bench_cuda.txt" | head -80
