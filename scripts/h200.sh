#!/usr/bin/env bash
# The GPU run behind docs/performance.md: install braze with CUDA, run the CUDA
# tests, the decode-latency breakdown, then `braze bench --backend cuda` per op.
# Run from the repository root on a machine with an NVIDIA GPU; logs and one
# merged JSON go to $1 (default ./gpu-out).
#
# Wheels in .whl/ are installed first (peers missing there: Liger,
# array-api-compat). A braze wheel among them (built elsewhere for that
# machine's Python with -DBRAZE_CUDA_ARCHS=90) is used as is; otherwise braze
# is built here for sm_90. Environment knobs: TESTS (pytest paths or -k
# expression, default all of tests/ with -m cuda), PYTEST_TIMEOUT (seconds,
# default 420), BENCH ("family:op ..." pairs, default every op below),
# BENCH_TIMEOUT (seconds per op, default 150), SKIP_TESTS=1, PY_OVERLAY=1.
set -uo pipefail
out=$(realpath -m "${1:-gpu-out}")
mkdir -p "$out"
repo=$PWD
export PYTHONPATH=/tmp/site
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  # PY_OVERLAY=1: a carried braze wheel whose native modules are current gets this tree's Python files
  [ "${PY_OVERLAY:-0}" = 1 ] && ls .whl/braze-*.whl >/dev/null 2>&1 && cp -r python/braze/. /tmp/site/braze/
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
if ! ls .whl/braze-*.whl >/dev/null 2>&1; then
  t0=$(date +%s)
  # a wheel, kept in $out: a later call on a fresh machine can carry it in .whl/
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
  # -v: each result is logged as it ends, so a run cut by the timeout still names its failures
  # (the whole suite, ~11k CUDA cases, took over 300 s with 12 workers on 2026-12-05)
  timeout ${PYTEST_TIMEOUT:-420} python3 -m pytest -v -rf -m cuda -n 12 -p no:cacheprovider ${TESTS:-$repo/tests} > "$out/pytest_cuda.log" 2>&1
  echo "pytest -m cuda: rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$out/pytest_cuda.log")"
  grep -E "FAILED|^ERROR" "$out/pytest_cuda.log" | head -20
fi
timeout 60 python3 "$repo/scripts/latency.py" > "$out/latency.txt" 2>&1; cat "$out/latency.txt"
default="norm:rms_norm norm:add_rms_norm norm:layer_norm norm:rms_norm_gated norm:rms_norm_vjp norm:layer_norm_vjp
         rope:rope_qk sampling:softmax sampling:sample"
i=0
for fo in ${BENCH:-$default}; do
  i=$((i + 1)); fam=${fo%%:*}; op=${fo#*:}
  peers=()
  case $op in
    rms_norm|add_rms_norm|rope_qk|softmax) ;;  # every peer
    sample) peers=(--peers torch) ;;
    *) [ "$fam" = attention ] || [ "$fam" = quant ] || peers=(--peers torch,liger) ;;
  esac
  timeout ${BENCH_TIMEOUT:-150} python3 -m braze bench --backend cuda --full --no-progress --json "$out/part_$(printf %02d $i).json" \
    --family "$fam" --op "$op" "${peers[@]}" >> "$out/bench_cuda.txt" 2>&1 || echo "bench $fo failed: $?"
done
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
grep -E "failed|Error" "$out/bench_cuda.txt" | head -10
python3 "$repo/scripts/bench_summary.py" "$out/bench_cuda.json"
