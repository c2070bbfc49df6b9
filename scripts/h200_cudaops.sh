#!/usr/bin/env bash
# One H200 run for the CUDA ops kernels (Hadamard, activations, embedding):
# build, the CUDA tests of those ops (their tuning variants included:
# tests/test_cuda_variants.py), then `braze bench --backend cuda --family ops`
# once per tuning variant (docs/cuda.md, "Tuning hooks"), each in its own
# process since a variant is read once. Logs, one JSON per run, all rows
# in bench_all.json and a table (op x run) go to $1 (default ./gpu-out).
# Meant to stay under 8 minutes with the build.
#
# Wheels in .whl/ are installed first (a braze wheel among them is used as
# is, else braze is built here for sm_90), as in scripts/h200.sh.
# Knobs: SKIP_TESTS=1, VARIANTS (default "0 1 2 3 4"), BUDGET_S (default 450:
# benches not started by then are skipped, so the run stays under 8 minutes).
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
  timeout 200 python3 -m pytest -q -m cuda -n 8 -p no:cacheprovider "$repo/tests" \
    -k "hadamard or silu or gelu or embedding or swiglu" > "$out/pytest_cuda.log" 2>&1
  echo "pytest -m cuda (ops): rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest_cuda.log")"
  grep -E "^FAILED|^ERROR" "$out/pytest_cuda.log" | head -20
fi

bench() {  # name, timeout, env assignments..., then -- and bench arguments
  local name=$1 limit=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if [ $(( $(date +%s) - t_start )) -gt "${BUDGET_S:-450}" ]; then
    echo "bench $name: skipped (the run is past ${BUDGET_S:-450} s)"; return
  fi
  local t0=$(date +%s)
  env "${envs[@]}" timeout "$limit" python3 -m braze bench --backend cuda --family ops --no-progress \
    --json "$out/bench_$name.json" "$@" > "$out/bench_$name.txt" 2>&1 || echo "bench $name failed: $?"
  echo "bench $name: $(( $(date +%s) - t0 )) s"
}
# Run k: activation and embedding variant k, and (the other knob, other ops)
# a Hadamard thread size. Each op's first decode and prefill shape (the
# gated ops at 4096 x 2*14336, Hadamard at 16384 x 4096), then embedding at
# all its shapes (4096 ids x 4096 among them); torch and Liger beside the
# defaults only. The lead reruns the winner with --full (16384 x 2*14336).
had=(16 8 32 16 16)
for v in ${VARIANTS:-0 1 2 3 4}; do
  peers=none; [ "$v" = 0 ] && peers=torch,liger
  e=${had[$v]:-16}
  envs=(BRAZE_CUDA_ACT_VARIANT=$v BRAZE_CUDA_EMB_VARIANT=$v BRAZE_CUDA_HAD_ELEMS=$e)
  bench "v${v}_had$e" 100 "${envs[@]}" -- --peers $peers
  bench "v${v}_emb" 60 "${envs[@]}" -- --op embedding --full --peers none
done

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
runs = sorted({r["run"].split("_")[0] for r in rows})  # v0..v4
table = {}
for r in rows:
    name = r["run"].split("_")[0] if r["impl"] == "braze" else r["impl"]
    key = (r["op"], "x".join(map(str, r["shape"])))
    table.setdefault(key, {})[name] = f"{r['ms'] * 1e3:.1f}us {r['pct_ceiling']:.0f}%"
cols = runs + sorted({r["impl"] for r in rows} - {"braze"})
print("braze per variant vK (BRAZE_CUDA_ACT/EMB_VARIANT=K; hadamard rows: E = 16, 8, 32, 16, 16) and peers")
print(f"{'op':<15} {'shape':<14} " + " ".join(f"{c:>15}" for c in cols))
for (op, shape), cells in table.items():
    print(f"{op:<15} {shape:<14} " + " ".join(f"{cells.get(c, '-'):>15}" for c in cols))
PY
echo "total: $(( $(date +%s) - t_start )) s"
