#!/usr/bin/env bash
# One H200 run for the CUDA ops kernels (Hadamard, activations, embedding):
# build, the CUDA tests of those ops (their tuning variants included:
# tests/test_cuda_variants.py), then `braze bench --backend cuda --family ops`
# once per tuning variant (docs/cuda.md, "Tuning hooks"), each in its own
# process since a variant is read once. Logs, one JSON per run and a
# variant table go to $1 (default ./gpu-out). About 6-8 minutes.
#
# Wheels in .whl/ are installed first (a braze wheel among them is used as
# is, else braze is built here for sm_90), as in scripts/h200.sh.
# Knobs: SKIP_TESTS=1, VARIANTS (default "0 1 2 3 4"), HAD_ELEMS (default "8 16 32").
set -uo pipefail
out=$(realpath -m "${1:-gpu-out}")
mkdir -p "$out"
repo=$PWD
export PYTHONPATH=/tmp/site
t_start=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
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
  timeout 240 python3 -m pytest -q -m cuda -n 8 -p no:cacheprovider "$repo/tests" \
    -k "hadamard or silu or gelu or embedding or swiglu" > "$out/pytest_cuda.log" 2>&1
  echo "pytest -m cuda (ops): rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest_cuda.log")"
  grep -E "^FAILED|^ERROR" "$out/pytest_cuda.log" | head -20
fi

bench() {  # name, env assignments..., then -- and bench arguments
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local t0=$(date +%s)
  env "${envs[@]}" timeout 100 python3 -m braze bench --backend cuda --family ops --no-progress \
    --json "$out/bench_$name.json" "$@" > "$out/bench_$name.txt" 2>&1 || echo "bench $name failed: $?"
  echo "bench $name: $(( $(date +%s) - t0 )) s"
}
for v in ${VARIANTS:-0 1 2 3 4}; do
  peers=none; [ "$v" = 0 ] && peers=torch,liger  # the peers once, beside the default kernels
  for op in silu_and_mul gelu_and_mul embedding; do
    bench "act${v}_$op" BRAZE_CUDA_ACT_VARIANT=$v BRAZE_CUDA_EMB_VARIANT=$v -- --op $op --full --peers $peers
  done
done
for e in ${HAD_ELEMS:-8 16 32}; do
  peers=none; [ "$e" = 16 ] && peers=torch
  bench "had$e" BRAZE_CUDA_HAD_ELEMS=$e -- --op hadamard --full --peers $peers
done
# every other op of the family once, at the defaults
bench rest -- --op swiglu_clamped --peers torch,liger
bench rest_silu -- --op silu --peers torch
bench rest_gelu -- --op gelu --peers torch

python3 - "$out" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
rows = []
for p in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
    name = re.sub(r"^bench_|\.json$", "", os.path.basename(p))
    rep = json.load(open(p))
    for r in rep["rows"]:
        rows.append(dict(r, run=name, ceiling_gbs=rep["ceiling_gbs"], commit=rep["commit"], device=rep["device"]))
json.dump(rows, open(os.path.join(out, "bench_all.json"), "w"), indent=1)
print(f"{'run':<22} {'op':<15} {'shape':<16} {'impl':<8} {'us':>8} {'% copy':>7} {'max_err':>9}")
for r in rows:
    print(f"{r['run']:<22} {r['op']:<15} {'x'.join(map(str, r['shape'])):<16} {r['impl']:<8} "
          f"{r['ms'] * 1e3:8.1f} {r['pct_ceiling']:6.0f}% {r['max_err'] if r['max_err'] is not None else float('nan'):9.3g}")
PY
echo "total: $(( $(date +%s) - t_start )) s"
